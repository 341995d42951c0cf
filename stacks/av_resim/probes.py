"""av-resim's acceptance: given one recording per shard, the re-simulation batch's parallel shards complete, each
reading its recordings from the input container and writing a result per recording to the output one."""

from __future__ import annotations

from program.config.schema import StackConfig
from program.probes import RUN, BlobsWritten, BlobUpload, JobCompletes, JobFromTemplate, Probes
from stacks.av_resim.settings import INPUT, OUTPUT, ResimSettings, needs
from stacks.av_resim.workloads import RESIM

FOLDER = f"e2e-{RUN}/"
PROCESSED = r'"processed": [1-9]'
"""In a shard's summary line (docker/jobs/resim.py): it simulated recordings of its own."""


def recording(container: str, index: int) -> BlobUpload:
    """Any bytes are a recording (docker/jobs/resim.py); each differs, so each result does."""
    return BlobUpload(INPUT, container, f"{FOLDER}recording-{index:04d}.bin", f"e2e recording {index}\n".encode() * 64)


def probes(cfg: StackConfig, st: ResimSettings) -> Probes:
    ran = "the re-simulation shards complete"
    source, results = (cfg.storage_account(role).container_names[0] for role in (INPUT, OUTPUT))
    # Shard i takes every N-th recording in sorted order: N recordings give each shard one to read and write.
    given = tuple(recording(source, i) for i in range(st.jobs))
    namespace = needs(cfg, st).namespace or ""
    return (JobCompletes(ran, namespace, JobFromTemplate(RESIM), log_pattern=PROCESSED, given=given),
            BlobsWritten("each recording's result is in blob storage", OUTPUT, results, FOLDER, count=st.jobs,
                         after=ran))
