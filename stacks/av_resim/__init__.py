"""Seed 003: AV re-simulation on a private cluster with private ACR and input/output blob storage."""

from program.scenario import Scenario
from stacks.av_resim.deploy import deploy
from stacks.av_resim.probes import probes
from stacks.av_resim.settings import MOVED, ResimSettings, check, needs

SCENARIO = Scenario(
    name="av-resim",
    summary="AV re-simulation on a private cluster: private ACR and blob storage, a time-sliced T4 spot pool "
            "and an A100 pool, parallel GPU jobs reading and writing blobs, queued by Kueue",
    seed="003 AV re-simulation",
    settings=ResimSettings,
    needs=needs,
    check=check,
    moved=MOVED,
    deploy=deploy,
    probes=probes,
)
