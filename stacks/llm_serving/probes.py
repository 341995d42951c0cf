"""llm-serving's acceptance: the OpenAI-compatible endpoint answers a chat completion through its Service (vLLM's,
or the one KAITO writes for its Workspace)."""

from __future__ import annotations

import json

from program.config.schema import StackConfig
from program.probes import HttpAnswers, Probes
from stacks.llm_serving import settings as llm
from stacks.llm_serving.settings import LlmSettings, Runtime
from stacks.llm_serving.workloads import SERVER, SERVICE_PORT

CHAT_PATH = "/v1/chat/completions"
ANSWERED = r'"role"\s*:\s*"assistant"'
"""An OpenAI chat completion's message (vLLM's ChatCompletionResponse: choices[].message.role)."""


def served_model(st: LlmSettings) -> str:
    """What clients send as ``model``: vLLM's served name, or KAITO's preset (as the stack's llmModel output)."""
    return llm.served_name(st) if st.runtime == Runtime.VLLM else st.kaito_preset


def probes(cfg: StackConfig, st: LlmSettings) -> Probes:
    body = json.dumps({"model": served_model(st), "max_tokens": 16,
                       "messages": [{"role": "user", "content": "Name one thing a GPU node pool in AKS does."}]})
    namespace = llm.needs(cfg, st).namespace or ""
    # A first start loads the weights, compiles and captures CUDA graphs (STARTUP_SECONDS in workloads.py).
    return (HttpAnswers("a chat completion through the Service", namespace, SERVER, SERVICE_PORT, CHAT_PATH, ANSWERED,
                        method="POST", body=body, timeout_s=3600),)
