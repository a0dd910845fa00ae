"""Tests for smat.data.eraser on tiny ERASER-format fixtures written to tmp_path."""

import json

import numpy as np
import pytest

from smat.data.eraser import load_eraser

DOCS = {
    "negR_000.txt": "the plot is dull .\nit 's a mess , truly .\n",
    "posR_000.txt": "a wonderful film .\ni loved it .\n",
}


def _evidence(docid, start, end):
    words = " ".join(DOCS[docid].split()).split(" ")
    return {"docid": docid, "start_token": start, "end_token": end, "start_sentence": 0,
            "end_sentence": 1, "text": " ".join(words[start:end])}


def _record(docid, label, groups):
    return {"annotation_id": docid, "classification": label, "evidences": groups,
            "query": "What is the sentiment of this review?", "query_type": None}


@pytest.fixture
def eraser_dir(tmp_path):
    (tmp_path / "docs").mkdir()
    for docid, text in DOCS.items():
        (tmp_path / "docs" / docid).write_text(text, encoding="utf-8")
    records = [
        _record("negR_000.txt", "NEG", [[_evidence("negR_000.txt", 3, 4)],
                                        [_evidence("negR_000.txt", 6, 9)]]),
        _record("posR_000.txt", "POS", [[_evidence("posR_000.txt", 1, 2),
                                         _evidence("posR_000.txt", 5, 6)]]),
    ]
    (tmp_path / "val.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    (tmp_path / "test.jsonl").write_text("")
    return tmp_path


def test_loads_texts_labels_and_word_masks(eraser_dir):
    rd = load_eraser(eraser_dir, split="validation")
    assert rd.data.texts == ("the plot is dull . it 's a mess , truly .",
                             "a wonderful film . i loved it .")
    assert rd.data.label_names == ("NEG", "POS")
    np.testing.assert_array_equal(rd.data.labels, [0, 1])
    assert rd.ids == ("negR_000.txt", "posR_000.txt")
    words0 = rd.data.texts[0].split()
    assert [w for w, m in zip(words0, rd.word_masks[0], strict=True) if m] == [
        "dull", "'s", "a", "mess"]
    assert rd.word_masks[1].tolist() == [False, True, False, False, False, True, False, False]
    assert rd.data.text_pairs is None and rd.pair_word_masks is None


def test_query_as_pair_and_label_names(eraser_dir):
    rd = load_eraser(eraser_dir, split="val", query_as_pair=True, label_names=["POS", "NEG"])
    assert rd.data.text_pairs == ("What is the sentiment of this review?",) * 2
    np.testing.assert_array_equal(rd.data.labels, [1, 0])


def test_bad_inputs(eraser_dir):
    with pytest.raises(ValueError, match=r"unknown ERASER split 'dev2'"):
        load_eraser(eraser_dir, split="dev2")
    with pytest.raises(ValueError, match="is empty"):
        load_eraser(eraser_dir, split="test")
    with pytest.raises(FileNotFoundError, match="train.jsonl"):
        load_eraser(eraser_dir, split="train")
    (eraser_dir / "docs" / "posR_000.txt").unlink()
    with pytest.raises(FileNotFoundError, match="posR_000.txt"):
        load_eraser(eraser_dir, split="val")


def test_evidence_text_must_match_the_document(eraser_dir):
    record = _record("negR_000.txt", "NEG", [[dict(_evidence("negR_000.txt", 3, 4),
                                                   text="brilliant")]])
    (eraser_dir / "train.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(ValueError, match=r"read 'dull', not 'brilliant'"):
        load_eraser(eraser_dir, split="train")


def test_evidence_outside_the_document(eraser_dir):
    record = _record("negR_000.txt", "NEG", [[{"docid": "negR_000.txt", "start_token": 10,
                                               "end_token": 40}]])
    (eraser_dir / "train.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(ValueError, match=r"word span \(10, 40\) is outside \[0, 12\]"):
        load_eraser(eraser_dir, split="train")


def test_missing_key(eraser_dir):
    (eraser_dir / "train.jsonl").write_text(json.dumps({"annotation_id": "x"}) + "\n")
    with pytest.raises(ValueError, match="lacks the key 'classification'"):
        load_eraser(eraser_dir, split="train")
