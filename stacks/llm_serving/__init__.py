"""An OpenAI-compatible LLM endpoint on the GPU pool: vLLM scaled on its queue, or a KAITO preset; observed and
load-tested like the other scenarios (README.md)."""

from program.scenario import Scenario
from stacks.llm_serving.deploy import deploy
from stacks.llm_serving.probes import probes
from stacks.llm_serving.settings import LlmSettings, check, needs

SCENARIO = Scenario(
    name="llm-serving",
    summary="An OpenAI-compatible LLM endpoint on a GPU pool: vLLM scaled by KEDA on its request queue (weights "
            "from blob storage or a pinned hub revision), or a KAITO preset; internal only, with a load test",
    seed="- (none: what GPU users on AKS run today)",
    settings=LlmSettings,
    needs=needs,
    check=check,
    deploy=deploy,
    probes=probes,
)
