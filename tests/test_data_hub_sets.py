"""Tests for smat/data/hub_sets.py: each Hub data set, given as `save_to_disk` copies with
the Hub's schemas (a mirror), becomes the folder the experiments read, once."""

import gzip
import json

import datasets
import numpy as np
import pytest

from smat.data import load_dataset, load_eraser
from smat.data.hub_sets import HUB_SETS, hub_data_dir

SENTENCES = ("a gripping , funny film", 'it\'s "bad" -- really bad', "the plot wanders")


def _save(mirror, hub_id, splits):
    datasets.DatasetDict(splits).save_to_disk(str(mirror / hub_id.replace("/", "__")))


def _sentiment(names=("negative", "positive")):
    return datasets.ClassLabel(names=list(names))


@pytest.fixture
def mirror(tmp_path):
    """Every Hub id of HUB_SETS as a small save_to_disk copy, with the Hub's columns."""
    root = tmp_path / "mirror"
    glue = datasets.Features({"idx": datasets.Value("int32"),
                              "sentence": datasets.Value("string"), "label": _sentiment()})
    rows = {"idx": [0, 1, 2], "sentence": list(SENTENCES), "label": [1, 0, 0]}
    _save(root, "stanfordnlp/sst2", {
        "train": datasets.Dataset.from_dict(rows, features=glue),
        "validation": datasets.Dataset.from_dict({**rows, "label": [1, 1, 0]}, features=glue),
        # GLUE hides its test labels
        "test": datasets.Dataset.from_dict({**rows, "label": [-1, -1, -1]},
                                           features=datasets.Features({
                                               **glue, "label": datasets.Value("int64")}))})
    _save(root, "SetFit/sst2", {"test": datasets.Dataset.from_dict(
        {"text": ["one good", "one bad"], "label": [1, 0],
         "label_text": ["positive", "negative"]})})
    _save(root, "stanfordnlp/imdb", {"test": datasets.Dataset.from_dict(
        {"text": ["<br />great", "awful"], "label": [1, 0]},
        features=datasets.Features({"text": datasets.Value("string"),
                                    "label": _sentiment(("neg", "pos"))}))})
    movies = datasets.Features({"review": datasets.Value("string"),
                                "label": _sentiment(("NEG", "POS")),
                                "evidences": datasets.Sequence(datasets.Value("string"))})
    review = {"review": ["the film is dull .\nits ending , though , is wonderful ."],
              "label": [1], "evidences": [["is wonderful", "dull"]]}
    _save(root, "eraser-benchmark/movie_rationales", {
        split: datasets.Dataset.from_dict(review, features=movies)
        for split in ("train", "validation", "test")})
    return root


def test_sst2_becomes_the_glue_folder_with_labelled_test_sentences(mirror, tmp_path):
    folder = hub_data_dir("sst2_glue", cache=tmp_path / "cache", mirror=mirror)
    assert folder == tmp_path / "cache" / "sst2_glue"
    train = load_dataset(str(folder / "train.tsv"), text_column="sentence")
    assert train.texts == SENTENCES and train.labels.tolist() == [1, 0, 0]
    dev = load_dataset(str(folder / "dev.tsv"), text_column="sentence")
    assert dev.labels.tolist() == [1, 1, 0]
    test = load_dataset(str(folder / "test-labeled.tsv"), text_column="sentence")
    assert test.texts == ("one good", "one bad") and test.labels.tolist() == [1, 0]


def test_imdb_becomes_the_gzipped_test_split(mirror, tmp_path):
    folder = hub_data_dir("imdb_maas", cache=tmp_path / "cache", mirror=mirror)
    with gzip.open(folder / "test.jsonl.gz", "rt", encoding="utf-8") as stream:
        rows = [json.loads(line) for line in stream]
    assert rows == [{"text": "<br />great", "label": 1}, {"text": "awful", "label": 0}]


def test_movie_rationales_become_eraser_spans_over_the_review_words(mirror, tmp_path):
    folder = hub_data_dir("eraser_movies", cache=tmp_path / "cache", mirror=mirror)
    loaded = load_eraser(folder, split="test")
    words = loaded.data.texts[0].split()
    marked = [word for word, on in zip(words, loaded.word_masks[0], strict=True) if on]
    assert marked == ["dull", "is", "wonderful"]  # both evidences, in review order
    assert loaded.data.label_names[int(loaded.data.labels[0])] == "POS"
    assert np.asarray(loaded.word_masks[0]).sum() == 3


def test_a_finished_folder_is_reused_without_the_hub(mirror, tmp_path):
    hub_data_dir("imdb_maas", cache=tmp_path / "cache", mirror=mirror)
    stamp = (tmp_path / "cache" / "imdb_maas" / "test.jsonl.gz").stat().st_mtime_ns
    # no mirror now: a finished folder never reads the Hub again
    assert hub_data_dir("imdb_maas", cache=tmp_path / "cache", mirror=tmp_path / "none")
    assert (tmp_path / "cache" / "imdb_maas" / "test.jsonl.gz").stat().st_mtime_ns == stamp


def test_bad_names_mirrors_and_evidence_are_refused(mirror, tmp_path):
    with pytest.raises(ValueError, match="no Hub data set 'sst5'"):
        hub_data_dir("sst5", cache=tmp_path / "cache", mirror=mirror)
    with pytest.raises(FileNotFoundError, match="has no stanfordnlp__imdb/"):
        hub_data_dir("imdb_maas", cache=tmp_path / "other", mirror=tmp_path / "empty")
    assert not (tmp_path / "other" / "imdb_maas" / ".complete").exists()
    _save(mirror, "eraser-benchmark/movie_rationales", {split: datasets.Dataset.from_dict(
        {"review": ["a fine film"], "label": [1], "evidences": [["not there"]]},
        features=datasets.Features({"review": datasets.Value("string"),
                                    "label": _sentiment(("NEG", "POS")),
                                    "evidences": datasets.Sequence(datasets.Value("string"))}))
        for split in ("train", "validation", "test")})
    with pytest.raises(ValueError, match="train row 0: evidence 'not there' is not in"):
        hub_data_dir("eraser_movies", cache=tmp_path / "third", mirror=mirror)
    assert set(HUB_SETS) == {"sst2_glue", "imdb_maas", "eraser_movies"}
