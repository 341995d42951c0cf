"""The gpu-basics scenario (seed 002): a training Job on the GPU pool, no host driver mounts."""

from __future__ import annotations

from tests.helpers import JOB, gpus, pod_spec


def test_training_job_runs_on_the_gpu_pool_without_host_driver_mounts(render_of):
    r = render_of("gpu-basics")
    job = r.named("training-job", JOB)
    pod = pod_spec(job.revealed)
    assert gpus(pod) == 1 and pod["nodeSelector"] == {"kubernetes.azure.com/agentpool": "t4"}
    assert not [v for v in pod["volumes"] if "hostPath" in v]
    assert {v["name"]: v for v in pod["volumes"]}["checkpoints"] == {"name": "checkpoints",
                                                                      "emptyDir": {"sizeLimit": "5Gi"}}
    (c,) = pod["containers"]
    assert c["command"][:2] == ["python", "train.py"] and "--steps" in c["command"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert job.revealed["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    assert r.outputs["trainingLogs"] == "kubectl -n gpu-basics logs -f job/train"
