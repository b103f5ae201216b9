"""The population of inner runs is sharded over a device mesh and gives the same result.

Runs in a subprocess with two forced host CPU devices (XLA_FLAGS must be set before JAX
starts), so it tests the same code path as several GPUs.
"""

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, os
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    os.environ["XLA_FLAGS"] = flags.strip()
    import jax, numpy as np
    from jax.sharding import Mesh, PartitionSpec
    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.optimizers import base as opt_base
    from learnopt.outer_trainers import gradient_learner
    from learnopt.run import build
    from learnopt.tasks import base as tasks_base
    from learnopt.testing import count_compiles

    def run(mesh, name, num_tasks):
        task = tasks_base.get_task("ImageMLP_Digits8_Relu32")  # fresh, same data stream
        lopt = lopt_base.LearnableAdam()
        est = build.make_estimator(name, task, lopt, trunc_length=3, num_tasks=num_tasks,
                                      total_length=9)
        learner = gradient_learner.SingleMachineGradientLearner(
            lopt, [est], opt_base.Adam(1e-2), mesh=mesh)
        state = learner.init(jax.random.PRNGKey(0))
        with count_compiles() as names:
            for i in range(5):
                state, loss, _ = learner.update(state, jax.random.PRNGKey(i))
        specs = sorted({str(x.sharding.spec) for x in
                        jax.tree.leaves(state.gradient_estimator_states)
                        if hasattr(x.sharding, "spec")})
        theta = {k: float(v) for k, v in learner.get_theta(state).items()}
        return {"compiles": names.count("_update"), "specs": specs, "theta": theta,
                "loss": float(loss)}

    mesh = Mesh(np.array(jax.devices()), ("tasks",))
    out = {"devices": len(jax.devices())}
    out["pes"] = {"one": run(None, "pes", 4), "mesh": run(mesh, "pes", 4)}
    try:
        run(mesh, "pes", 3)
        out["error"] = None
    except ValueError as e:
        out["error"] = str(e)
    print("RESULT" + json.dumps(out))
    """
)


def test_population_sharded_over_two_devices_matches_one_device(tmp_path):
    env = dict(os.environ, LEARNOPT_DATA_DIR=str(tmp_path / "tfds"))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    out = json.loads(line[len("RESULT") :])
    assert out["devices"] == 2
    one, mesh = out["pes"]["one"], out["pes"]["mesh"]
    assert one["compiles"] == 1 and mesh["compiles"] == 1
    assert "P('tasks',)" in mesh["specs"], mesh["specs"]  # PES states live split
    for k, v in one["theta"].items():
        assert abs(v - mesh["theta"][k]) < 1e-4 * max(1.0, abs(v)), k
    assert abs(one["loss"] - mesh["loss"]) < 1e-4
    assert abs(one["theta"]["log_lr"] - (-6.907755)) > 1e-4  # theta moved
    assert out["error"] is not None and "multiple of the 2 devices" in out["error"]
