"""``learnopt doctor`` says what learnopt finds on the machine (issue 31)."""

from __future__ import annotations

from learnopt import cli
from learnopt.learned_optimizers.blocks import fused_kernel
from learnopt.tasks.datasets import storage


def test_doctor_reports_devices_kernel_data_and_caches(tmp_path, monkeypatch, capsys):
    data, manual, cache = tmp_path / "data", tmp_path / "manual", tmp_path / "cache"
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(data))
    monkeypatch.setenv("LEARNOPT_MANUAL_DIR", str(manual))
    monkeypatch.setenv("LEARNOPT_CACHE_DIR", str(cache))
    monkeypatch.setenv("LEARNOPT_FUSED_KERNEL", "0")
    # the kernel's state is per process: the "off" this test asks for stays in the test
    monkeypatch.setattr(fused_kernel, "_state", {})
    manual.mkdir()
    for name in storage.dataset_spec("mnist").sha256:  # the user placed MNIST's files
        (manual / name).write_bytes(b"")
    (cache / "baselines").mkdir(parents=True)
    (cache / "baselines" / "x.npz").write_bytes(b"1" * 2_000_000)
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("learnopt ") and out[2].startswith("JAX ")
    assert "backend cpu" in out[2]
    said = {line.split(":")[0].strip(): line for line in out}
    assert said["fused CPU kernel"] == (
        "fused CPU kernel: off (turned off by LEARNOPT_FUSED_KERNEL=0); the per-element MLPs "
        "use the blocked matmuls: same values, updates about 2.3-2.6x slower on ~2M parameters"
    )
    assert said["data folder"] == f"data folder: {data} ($LEARNOPT_DATA_DIR sets it)"
    rows = {line.split()[0]: line for line in out if line.startswith("  ")}
    assert set(rows) == set(storage.dataset_names())
    assert "embedded, prepared at first use" in rows["digits8"]
    assert f"its files are in {manual}, prepared at first use" in rows["mnist"]
    assert f"not available: place its files in {manual}" in rows["cifar10"]
    assert said["baseline cache"] == f"baseline cache: {cache / 'baselines'}: 1 files, 2.0 MB"
    assert said["TensorFlow"] == "TensorFlow: not imported by learnopt"
