#!/bin/bash
# Per-role step factors on meta-valid's tasks with recipe 23's chosen theta (a diagnostic
# on meta-valid; heldout untouched). Writes role_factors.txt. Ran at 8ade7cd (about 4 min
# for the Transformer's nine specs, 9 min for the rest on the 2 cores).
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
HERE=benchmarks/results/celoadam-es-from-release-broad_2026-12-07
THETA=$HERE/theta_chosen_step50.msgpack
{
  $PY $HERE/role_factors.py $THETA TransformerLM_PyStdlibBytes_MultiRuntime_1 \
    none,all:0.33,all:0.6,all:1.6,input:0.33,hidden:0.33,vector:0.33,input:3,vector:3
  $PY $HERE/role_factors.py $THETA ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16,ImageMLPAE_Mnist5k_128x32x128_bs128,Conv_Digits8_16x32x32,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32 \
    none,input:3,vector:3,hidden:0.5
} 2>/dev/null > $HERE/role_factors.txt
