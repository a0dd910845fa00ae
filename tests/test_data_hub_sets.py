"""Tests for smat/data/hub_sets.py: each Hub data set, given as `save_to_disk` copies with
the Hub's schemas (a mirror), becomes the folder the experiments read, once."""

import gzip
import json

import datasets
import numpy as np
import pytest

from smat.data import load_dataset, load_eraser, load_mlqe
from smat.data.hub_sets import HUB_SETS, hub_data_dir, load_hub, mirror_name

SENTENCES = ("a gripping , funny film", 'it\'s "bad" -- really bad', "the plot wanders")
# MLQE-PE rows: (raw en, Moses-tokenized en, raw de, tokenized de), as WMT20's task 1 (raw)
# and task 2 (tokenized, Moses' escapes and @-@ hyphens) hold them
MLQE_ROWS = (
    ('The "Hello-world" program isn\'t hard.',
     "The &quot; Hello @-@ world &quot; program isn &apos;t hard .",
     'Das "Hallo-Welt" Programm ist nicht schwer.',
     "Das &quot; Hallo @-@ Welt &quot; Programm ist nicht schwer ."),
    ("Prices rose 5% in [2019] | again.", "Prices rose 5 % in &#91; 2019 &#93; &#124; again .",
     "Die Preise stiegen 2019 um 5%.", "Die Preise stiegen 2019 um 5 % ."),
    ("Tom & Jerry ran.", "Tom &amp; Jerry ran .", "Tom & Jerry liefen.",
     "Tom &amp; Jerry liefen ."),
)


def _save(mirror, hub_id, splits):
    datasets.DatasetDict(splits).save_to_disk(str(mirror / hub_id.replace("/", "__")))


def _sentiment(names=("negative", "positive")):
    return datasets.ClassLabel(names=list(names))


def _mlqe_bad(row, words):
    """Which of a template row's `words` are BAD in the synthetic tags (varies by row)."""
    return [(word + row) % 3 == 0 for word in range(words)]


def _mlqe_z_mean(row):
    return round(0.25 * row - 0.4, 2)


def _mlqe_split(rows, *, task2_rows=None, blind=False, untagged=False):
    """Task 1 and task 2 of WMT20's QE on the Hub (their schemas) for the template `rows`
    (task 2 may hold other rows: a misaligned copy); `untagged`: the Hub's test split, whose
    task-2 tags are empty (WMT20's blind word-level test set, as the Hub's loading script
    fills it); `blind`: task 1's scores are -10,000 too."""
    tag = datasets.ClassLabel(names=["BAD", "OK"])
    task1 = datasets.Features({
        "segid": datasets.Value("int32"), "translation": datasets.Translation(("en", "de")),
        "scores": datasets.Sequence(datasets.Value("float32")),
        "mean": datasets.Value("float32"),
        "z_scores": datasets.Sequence(datasets.Value("float32")),
        "z_mean": datasets.Value("float32"), "model_score": datasets.Value("float32"),
        "doc_id": datasets.Value("string"), "nmt_output": datasets.Value("string"),
        "word_probas": datasets.Sequence(datasets.Value("float32"))})
    task2 = datasets.Features({
        "translation": datasets.Translation(("en", "de")),
        "src_tags": datasets.Sequence(tag), "mt_tags": datasets.Sequence(tag),
        "pe": datasets.Value("string"), "hter": datasets.Value("float32"),
        "alignments": datasets.Sequence(datasets.Sequence(datasets.Value("int32")))})
    first = datasets.Dataset.from_dict({
        "segid": list(range(len(rows))),
        "translation": [{"en": MLQE_ROWS[r][0], "de": MLQE_ROWS[r][2]} for r in rows],
        "scores": [[] if blind else [70.0, 80.0, 90.0] for _ in rows],
        "mean": [-10_000 if blind else 80.0 for _ in rows],
        "z_scores": [[] if blind else [0.5, -0.25, 0.125] for _ in rows],
        "z_mean": [-10_000 if blind else _mlqe_z_mean(r) for r in rows],
        "model_score": [-10_000 if blind else -0.3 for _ in rows],
        "doc_id": ["doc" for _ in rows], "nmt_output": [MLQE_ROWS[r][2] for r in rows],
        "word_probas": [[-0.1] for _ in rows]}, features=task1)
    second_rows = rows if task2_rows is None else task2_rows
    src_tags, mt_tags = [], []
    for r in second_rows:
        src_words, mt_words = len(MLQE_ROWS[r][1].split()), len(MLQE_ROWS[r][3].split())
        src_tags.append([0 if bad else 1 for bad in _mlqe_bad(r, src_words)])
        # every gap BAD (a word missing there), so a gap read as a word shows
        mt_tags.append([0] + [t for bad in _mlqe_bad(r + 1, mt_words) for t in (1 - bad, 0)])
    second = datasets.Dataset.from_dict({
        "translation": [{"en": MLQE_ROWS[r][1], "de": MLQE_ROWS[r][3]} for r in second_rows],
        "src_tags": [[] for _ in second_rows] if blind or untagged else src_tags,
        "mt_tags": [[] for _ in second_rows] if blind or untagged else mt_tags,
        "pe": ["" if blind or untagged else MLQE_ROWS[r][3] for r in second_rows],
        "hter": [-10_000 if blind or untagged else 0.2 for _ in second_rows],
        "alignments": [[[0, 0]] for _ in second_rows]}, features=task2)
    return first, second


def _save_mlqe(root, splits):
    """The two WMT20 QE tasks (config en-de) in `root` from {split: (task1, task2)}."""
    for index, hub_id in enumerate(("wmt/wmt20_mlqe_task1", "wmt/wmt20_mlqe_task2")):
        datasets.DatasetDict({split: pair[index] for split, pair in splits.items()}) \
            .save_to_disk(str(root / mirror_name(hub_id, "en-de")))


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
    _save_mlqe(root, {"train": _mlqe_split([0, 1, 2]), "validation": _mlqe_split([2, 0]),
                      "test": _mlqe_split([1, 2], untagged=True)})
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


def test_mlqe_pe_becomes_the_release_layout_with_both_tasks_rows(mirror, tmp_path):
    folder = hub_data_dir("mlqe_pe", cache=tmp_path / "cache", mirror=mirror)
    for split, rows in (("train", [0, 1, 2]), ("dev", [2, 0])):
        loaded = load_mlqe(folder, split=split)
        # the tokenized texts the tags refer to, the DA z_mean of the same row
        assert loaded.data.texts == tuple(MLQE_ROWS[r][1] for r in rows)
        assert loaded.data.text_pairs == tuple(MLQE_ROWS[r][3] for r in rows)
        np.testing.assert_allclose(loaded.data.labels, [_mlqe_z_mean(r) for r in rows],
                                   atol=1e-6)
        for r, src, mt in zip(rows, loaded.word_masks, loaded.pair_word_masks, strict=True):
            assert src.tolist() == _mlqe_bad(r, len(MLQE_ROWS[r][1].split()))
            assert mt.tolist() == _mlqe_bad(r + 1, len(MLQE_ROWS[r][3].split()))
        # the raw DA texts are task 1's, the raw mean its own column
        raw = load_mlqe(folder, split=split, score="mean", word_tags=False)
        assert raw.data.texts == tuple(MLQE_ROWS[r][0] for r in rows)
        assert raw.data.labels.tolist() == [80.0] * len(rows)
    tags = (folder / "post-editing" / "en-de" / "train" / "train.tags").read_text().split("\n")
    assert tags[0].split()[:3] == ["BAD", "OK", "BAD"]  # gap, word, gap: gaps kept
    header = (folder / "direct-assessments" / "en-de" / "dev" / "dev.ende.df.short.tsv") \
        .read_text().split("\n")[:2]
    assert header[0].split("\t") == ["index", "original", "translation", "scores", "mean",
                                     "z_scores", "z_mean", "model_scores"]
    assert header[1].split("\t")[3:] == ["[70.0, 80.0, 90.0]", "80.0", "[0.5, -0.25, 0.125]",
                                         "0.1", "-0.3"]


def test_the_untagged_test_split_has_texts_and_scores_and_its_tags_are_refused(mirror,
                                                                              tmp_path):
    folder = hub_data_dir("mlqe_pe", cache=tmp_path / "cache", mirror=mirror)
    assert not list(folder.glob("post-editing/en-de/test/*tags"))
    notes = json.loads((folder / "hub_notes.json").read_text())
    assert notes["left_out"]["en-de"] == {} and set(notes["untagged"]["en-de"]) == {"test"}
    # sentence-level work reads its tokenized texts and DA scores (Table 5) ...
    loaded = load_mlqe(folder, split="test20", word_tags=False, texts="tokenized")
    assert loaded.data.texts == (MLQE_ROWS[1][1], MLQE_ROWS[2][1])
    np.testing.assert_allclose(loaded.data.labels, [_mlqe_z_mean(1), _mlqe_z_mean(2)],
                               atol=1e-6)
    assert loaded.word_masks is None
    # ... word-level work is told why there are no tags (Table 6)
    with pytest.raises(FileNotFoundError, match=r"en-de test: the Hugging Face Hub copy .* has "
                       r"no word tags for this split .*wmt20_mlqe_task2 has no word tags.*"
                       r"--data-dir with the GitHub release \(sheffieldnlp/"):
        load_mlqe(folder, split="test")
    with pytest.raises(ValueError, match="word tags refer to the tokenized texts"):
        load_mlqe(folder, split="train", texts="raw")
    with pytest.raises(ValueError, match="unknown MLQE-PE texts 'words'"):
        load_mlqe(folder, split="train", texts="words")


def test_a_blind_mlqe_split_is_left_out_and_refused_by_name(mirror, tmp_path):
    _save_mlqe(mirror, {"train": _mlqe_split([0, 1, 2]), "validation": _mlqe_split([2, 0]),
                        "test": _mlqe_split([1, 2], blind=True)})
    folder = hub_data_dir("mlqe_pe", cache=tmp_path / "cache", mirror=mirror)
    assert not list(folder.glob("*/en-de/test"))
    notes = json.loads((folder / "hub_notes.json").read_text())
    assert set(notes["left_out"]["en-de"]) == {"test"}
    for split in ("test", "test20"):
        with pytest.raises(FileNotFoundError, match=r"en-de test(20)?: the Hugging Face Hub copy "
                           r".* has no labels/tags for this split .*wmt20_mlqe_task1 has no "
                           r"DA scores.*--data-dir with the GitHub release \(sheffieldnlp/"):
            load_mlqe(folder, split=split, word_tags=False)
    with pytest.raises(FileNotFoundError, match="Hub copy .* holds en-de only; pass --data-dir"):
        load_mlqe(folder, language_pairs=["en-de", "ro-en"], split="train")


def test_mlqe_tasks_in_different_row_orders_are_refused(mirror, tmp_path):
    # one row in 20 that differs is tolerated (a tokenization not undone exactly) ...
    rows = [i % 3 for i in range(20)]
    _save_mlqe(mirror, {"train": _mlqe_split(rows, task2_rows=[*rows[:7], 0, *rows[8:]]),
                        "validation": _mlqe_split([2, 0]),
                        "test": _mlqe_split([1, 2], untagged=True)})
    folder = hub_data_dir("mlqe_pe", cache=tmp_path / "cache", mirror=mirror)
    assert len(load_mlqe(folder, split="train")) == 20
    # ... a shuffled task 2 is not
    _save_mlqe(mirror, {"train": _mlqe_split([0, 1, 2], task2_rows=[1, 2, 0]),
                        "validation": _mlqe_split([2, 0]),
                        "test": _mlqe_split([1, 2], untagged=True)})
    with pytest.raises(ValueError, match=r"MLQE-PE train: only 0.0% of the rows .* row 0: "
                       r"'The \"Hello-world\" program isn\\'t hard.' vs 'Prices rose 5 %"):
        hub_data_dir("mlqe_pe", cache=tmp_path / "other", mirror=mirror)
    assert not (tmp_path / "other" / "mlqe_pe" / ".complete").exists()


def test_a_hub_id_with_a_config_has_its_own_mirror_folder(mirror, tmp_path):
    assert mirror_name("stanfordnlp/sst2") == "stanfordnlp__sst2"
    assert mirror_name("wmt/wmt20_mlqe_task1", "en-de") == "wmt__wmt20_mlqe_task1__en-de"
    assert len(load_hub("wmt/wmt20_mlqe_task1", "en-de", mirror=mirror)["validation"]) == 2
    with pytest.raises(FileNotFoundError, match=r"no wmt__wmt20_mlqe_task1__et-en/ \(save "
                       r"datasets.load_dataset\('wmt/wmt20_mlqe_task1', 'et-en'\)"):
        load_hub("wmt/wmt20_mlqe_task1", "et-en", mirror=mirror)


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
    assert set(HUB_SETS) == {"sst2_glue", "imdb_maas", "eraser_movies", "mlqe_pe"}
