"""Machine reading comprehension by sentence selection.

The context is split into sentences; the question and every sentence are embedded
with all-MiniLM-L6-v2 (BERT, mean pooling, unit length) in one batch and the sentence
closest to the question (cosine similarity) is the answer. The model is loaded once
per worker process.

The answer path is kept short because the model is small: a GPU forward of a request
takes about as long as tokenising it. So the Rust tokenizer is called once per request
on every text, the forward runs as a CUDA graph captured per padded shape (one launch
instead of hundreds), pooling and scoring stay on the GPU, and each request makes one
copy back to the host.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from answer_request import Query
from device_status import torch_device

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256
"""The model's max_seq_length (sentence_bert_config.json): longer sentences are truncated, as the library does."""
SEQ_BUCKETS = (16, 32, 48, 64, 96, 128, 192, 256)
"""Padded lengths a batch is rounded up to: few CUDA graphs, little padding."""
MAX_BATCH = 256
"""Texts per forward; a larger request is embedded in chunks of this size."""
# A sentence ends at . ! or ? followed by whitespace, or at a blank line.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


@dataclass(frozen=True)
class Sentence:
    """A sentence of the context, with its character offsets in the context."""

    text: str
    start: int
    end: int


def split_sentences(context: str) -> list[Sentence]:
    """Sentences of `context` with offsets such that context[start:end] == text."""
    sentences = []
    position = 0
    for boundary in [*_SENTENCE_END.finditer(context), None]:
        stop = boundary.start() if boundary else len(context)
        piece = context[position:stop]
        stripped = piece.strip()
        if stripped:
            start = position + piece.index(stripped)
            sentences.append(Sentence(stripped, start, start + len(stripped)))
        if boundary:
            position = boundary.end()
    return sentences


MODEL_DIR = "/opt/model"
"""Where the image build put the model (fetch_model.py: Hugging Face at a pinned commit, each file checked)."""


def model_dir() -> Path:
    """Where the weights are: `MRC_MODEL_DIR`, else the image's copy."""
    return Path(os.environ.get("MRC_MODEL_DIR", MODEL_DIR))


def bucket(value: int, sizes: tuple[int, ...]) -> int:
    """The smallest size that holds `value` (the largest if none does)."""
    return next((size for size in sizes if size >= value), sizes[-1])


def batch_bucket(count: int) -> int:
    """Batch sizes are rounded up to a power of two, at least 8."""
    size = 8
    while size < count:
        size *= 2
    return min(size, MAX_BATCH)


class Encoder:
    """BERT forward, mean pooling over real tokens and unit length: what sentence-transformers' encode computes
    for this model (its modules.json: Transformer, Pooling mean, Normalize).

    On CUDA every (batch, length) shape is captured once as a CUDA graph and replayed; on the CPU it runs eagerly.
    """

    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.model = model
        self.device = device
        self.graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._pool = torch.cuda.graph_pool_handle() if device.type == "cuda" else None

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        weights = mask.unsqueeze(-1).float()
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=1)

    def _graph(self, shape: tuple[int, int]):
        if shape not in self.graphs:
            ids = torch.zeros(shape, dtype=torch.long, device=self.device)
            mask = torch.ones(shape, dtype=torch.long, device=self.device)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # warm-up on a side stream, as capture requires
                for _ in range(2):
                    self._forward(ids, mask)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool):
                out = self._forward(ids, mask)
            self.graphs[shape] = (graph, ids, mask, out)
        return self.graphs[shape]

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Unit embeddings of the first ``rows`` rows; ``ids`` and ``mask`` are padded host tensors."""
        if self.device.type != "cuda":
            return self._forward(ids, mask)
        graph, static_ids, static_mask, out = self._graph(tuple(ids.shape))
        static_ids.copy_(ids, non_blocking=True)
        static_mask.copy_(mask, non_blocking=True)
        graph.replay()
        return out


class Reader:
    """The embedding model on one device, answering batches of queries."""

    def __init__(self, device: torch.device | None = None):
        from tokenizers import Tokenizer
        from transformers import AutoModel

        self.device = device or torch_device()
        path = model_dir()
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()  # padded below, to the shape buckets
        # Half precision on the GPU: twice the throughput, scores move by about 1e-3.
        dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        model = AutoModel.from_pretrained(str(path), local_files_only=True, dtype=dtype)
        self.encoder = Encoder(model.to(self.device).eval(), self.device)

    def _tokens(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids and attention mask in host memory: on CUDA padded to a bucketed (batch, length) shape, one
        CUDA graph per shape; on the CPU to the longest text only."""
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=True)
        longest = max(len(e.ids) for e in encodings)
        graphs = self.device.type == "cuda"
        rows = batch_bucket(len(texts)) if graphs else len(texts)
        ids = np.zeros((rows, bucket(longest, SEQ_BUCKETS) if graphs else longest), dtype=np.int64)
        mask = np.zeros_like(ids)
        mask[len(texts):, 0] = 1  # padding rows attend to one token, so nothing divides by zero
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
        if graphs:
            ids_t, mask_t = ids_t.pin_memory(), mask_t.pin_memory()
        return ids_t, mask_t

    @torch.inference_mode()
    def embed(self, texts: list[str]) -> torch.Tensor:
        """Unit-length embeddings of `texts`, on the reader's device, one row per text."""
        parts = []
        for start in range(0, len(texts), MAX_BATCH):
            chunk = texts[start : start + MAX_BATCH]
            ids, mask = self._tokens(chunk)
            # A replayed graph's output is reused by the next replay of the same shape: copy the rows out.
            parts.append(self.encoder(ids, mask)[: len(chunk)].clone())
        return torch.cat(parts) if len(parts) > 1 else parts[0]

    @torch.inference_mode()
    def answer(self, queries: list[Query]) -> list[dict]:
        """The best sentence of each query's context, with its score and offsets."""
        per_query = [split_sentences(query.context) for query in queries]
        texts: list[str] = []
        questions: list[int] = []  # row of each query's question
        sentence_rows: list[int] = []  # row of each sentence, and its query and position in that query
        owners: list[int] = []
        positions: list[int] = []
        for index, (query, sentences) in enumerate(zip(queries, per_query, strict=True)):
            questions.append(len(texts))
            texts.append(query.question)
            sentence_rows.extend(range(len(texts), len(texts) + len(sentences)))
            texts.extend(sentence.text for sentence in sentences)
            owners.extend([index] * len(sentences))
            positions.extend(range(len(sentences)))
        # One forward for every question and sentence of the request: the GPU sees full batches.
        embeddings = self.embed(texts)
        count = len(sentence_rows)
        index = torch.tensor(sentence_rows + owners + positions + questions).to(self.device, non_blocking=True)
        rows, owner, position = index[:count], index[count : 2 * count], index[2 * count : 3 * count]
        question_rows = index[3 * count :]
        scores = (embeddings[rows] * embeddings[question_rows][owner]).sum(1)
        # Scores of each query's sentences side by side (-2 below any cosine), one maximum per query.
        table = torch.full((len(queries), max(len(s) for s in per_query)), -2.0, device=self.device)
        table[owner, position] = scores
        best_score, best = table.max(1)
        # The one copy back to the host, for the whole request.
        best, best_score = torch.stack((best.float(), best_score)).cpu().tolist()
        answers = []
        for sentences, chosen, score in zip(per_query, best, best_score, strict=True):
            sentence = sentences[int(chosen)]
            answers.append({
                "answer": sentence.text,
                "score": round(float(score), 4),
                "start": sentence.start,
                "end": sentence.end,
                "sentences": len(sentences),
                "device": self.device.type,
            })
        return answers


_reader: Reader | None = None
_reader_lock = threading.Lock()


def shared_reader() -> Reader:
    """The worker's one Reader, loaded on first use (the readiness probe triggers it)."""
    global _reader
    with _reader_lock:
        if _reader is None:
            _reader = Reader()
        return _reader
