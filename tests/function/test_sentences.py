"""Sentence splitting is pure: offsets must point back into the context exactly."""

from __future__ import annotations

import pytest

from tests.function.conftest import import_function_module

split_sentences = import_function_module("reader").split_sentences


@pytest.mark.parametrize(
    "context, expected",
    [
        ("One. Two! Three?", ["One.", "Two!", "Three?"]),
        ("  Leading space.   Trailing space.  ", ["Leading space.", "Trailing space."]),
        ("A heading\n\nA paragraph without a full stop", ["A heading", "A paragraph without a full stop"]),
        ("No punctuation at all", ["No punctuation at all"]),
        ("Version 2.10 ships CUDA 12.8. It runs on T4.", ["Version 2.10 ships CUDA 12.8.", "It runs on T4."]),
        ("   ", []),
    ],
)
def test_split_sentences_finds_each_sentence(context, expected):
    assert [s.text for s in split_sentences(context)] == expected


def test_sentence_offsets_index_the_context():
    context = "First one.  Second one!\n\n  Third one?  "
    for sentence in split_sentences(context):
        assert context[sentence.start : sentence.end] == sentence.text
