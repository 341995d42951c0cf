"""The reader's own forward (tokenizer, BERT, mean pooling, unit length) computes what sentence-transformers'
encode does for this model, so its answers are the library's; on the GPU the same forward runs as CUDA graphs
(measured in docs/function-on-gpu.md)."""

from __future__ import annotations

import pytest
import torch

from tests.function.conftest import import_function_module

reader = import_function_module("reader")

TEXTS = [
    "What installs the NVIDIA driver on the GPU nodes?",
    "The GPU operator installs the NVIDIA driver and the container toolkit on every GPU node.",
    "Short.",
    "word " * 400,  # longer than the model's 256 tokens: truncated as the library truncates
]


@pytest.fixture(scope="module")
def cpu_reader():
    return reader.shared_reader()  # the one the routes use (this machine has no GPU)


def test_embeddings_equal_sentence_transformers_encode(cpu_reader):
    from sentence_transformers import SentenceTransformer

    library = SentenceTransformer(str(reader.model_dir()), device="cpu", local_files_only=True)
    expected = library.encode(TEXTS, convert_to_tensor=True, normalize_embeddings=True)
    ours = cpu_reader.embed(TEXTS)
    assert ours.shape == expected.shape == (len(TEXTS), 384)
    assert torch.allclose(ours, expected, atol=1e-5)


def test_a_request_larger_than_one_forward_is_embedded_in_chunks(cpu_reader, monkeypatch):
    monkeypatch.setattr(reader, "MAX_BATCH", 3)
    chunked = cpu_reader.embed(TEXTS[:3] * 3)
    monkeypatch.setattr(reader, "MAX_BATCH", 256)
    assert torch.allclose(chunked, cpu_reader.embed(TEXTS[:3] * 3), atol=1e-6)


@pytest.mark.parametrize("value, expected", [(1, 16), (16, 16), (17, 32), (200, 256), (900, 256)])
def test_lengths_round_up_to_few_shapes(value, expected):
    assert reader.bucket(value, reader.SEQ_BUCKETS) == expected


@pytest.mark.parametrize("count, expected", [(1, 8), (8, 8), (9, 16), (68, 128), (1000, reader.MAX_BATCH)])
def test_batches_round_up_to_powers_of_two(count, expected):
    assert reader.batch_bucket(count) == expected
