# Weight decay on Celo-Adam: final train and valid loss beside warmup-cosine's frontier,
# on tasks that are not heldout's (meta-valid's two MLPs and Transformer). Run at commit
# 6cdf78f. (A first run with a batch-norm conv net outside every
# suite, Conv_Mnist5k_16_16x32x32_batchnorm, was stopped after 31 minutes on that task.)
python benchmarks/schedule_shapes.py \
  --tasks ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16 \
  --groups warmups,frontier,celo,weight_decay --weight-decays 0.03,0.1,0.3,1 --seeds 4 \
  --out benchmarks/results/weight_decay_shapes_2026-12-07
