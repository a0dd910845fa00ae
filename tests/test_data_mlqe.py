"""Tests for smat.data.mlqe on tiny MLQE-PE-format fixtures written to tmp_path."""

import numpy as np
import pytest

from smat.data.mlqe import load_mlqe

HEADER = "index\toriginal\ttranslation\tscores\tmean\tz_scores\tz_mean\tmodel_scores"


def _write_pair(root, lp, *, folder="dev", prefix="dev", src, mt, tags, source_tags, mean,
                z_mean):
    da = root / "direct-assessments" / lp / folder
    da.mkdir(parents=True)
    rows = [HEADER] + [
        f"{i}\t{s.replace(' ,', ',')}\t{m}\t[1, 2, 3]\t{a}\t[0, 0, 0]\t{z}\t-0.3"
        for i, (s, m, a, z) in enumerate(zip(src, mt, mean, z_mean, strict=True))]
    (da / f"{prefix}.{lp.replace('-', '')}.df.short.tsv").write_text("\n".join(rows) + "\n")
    pe = root / "post-editing" / lp / folder
    pe.mkdir(parents=True)
    for ext, lines in (("src", src), ("mt", mt), ("tags", tags), ("source_tags", source_tags)):
        (pe / f"{prefix}.{ext}").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def mlqe_dir(tmp_path):
    _write_pair(tmp_path, "en-de",
                src=["the house , big", "a cat"], mt=["das Haus gross", "eine Katze"],
                tags=["OK OK OK BAD OK OK OK", "OK OK OK BAD BAD"],
                source_tags=["OK OK OK BAD", "OK BAD"], mean=[70.5, 20.0],
                z_mean=[0.25, -1.5])
    _write_pair(tmp_path, "ro-en", src=["o pisica"], mt=["a cat"], tags=["OK BAD OK OK OK"],
                source_tags=["OK OK"], mean=[90.0], z_mean=[1.0])
    return tmp_path


def test_text_pair_regression_with_word_tags(mlqe_dir):
    rd = load_mlqe(mlqe_dir, language_pairs="en-de", split="validation")
    assert rd.data.task == "regression"
    assert rd.data.texts == ("the house , big", "a cat")
    assert rd.data.text_pairs == ("das Haus gross", "eine Katze")
    np.testing.assert_allclose(rd.data.labels, [0.25, -1.5])  # z_mean by default
    # Word tags are the odd positions of gap/word tags: words = BAD at "Haus" only / "Katze".
    assert rd.pair_word_masks[0].tolist() == [False, True, False]
    assert rd.pair_word_masks[1].tolist() == [False, True]
    assert rd.word_masks[0].tolist() == [False, False, False, True]
    assert rd.ids == ("en-de/dev/0", "en-de/dev/1")


def test_mean_score_pairs_concatenated_and_raw_texts(mlqe_dir):
    rd = load_mlqe(mlqe_dir, language_pairs=["en-de", "ro-en"], split="dev", score="mean",
                   word_tags=False)
    np.testing.assert_allclose(rd.data.labels, [70.5, 20.0, 90.0])
    assert rd.data.texts[0] == "the house, big"  # raw DA text, not the tokenized one
    assert rd.word_masks is None and rd.pair_word_masks is None
    assert rd.ids[-1] == "ro-en/dev/0"


def test_word_only_tags_are_accepted(mlqe_dir):
    pe = mlqe_dir / "post-editing" / "ro-en" / "dev"
    (pe / "dev.tags").write_text("BAD OK\n")
    rd = load_mlqe(mlqe_dir, language_pairs="ro-en", split="dev")
    assert rd.pair_word_masks[0].tolist() == [True, False]


def test_bad_inputs(mlqe_dir):
    with pytest.raises(ValueError, match="unknown MLQE-PE split 'valid'"):
        load_mlqe(mlqe_dir, split="valid")
    with pytest.raises(ValueError, match="unknown MLQE-PE score 'da'"):
        load_mlqe(mlqe_dir, split="dev", score="da")
    with pytest.raises(FileNotFoundError, match="train.ende.df.short.tsv"):
        load_mlqe(mlqe_dir, split="train")
    pe = mlqe_dir / "post-editing" / "ro-en" / "dev"
    (pe / "dev.tags").write_text("OK OK OK\n")
    with pytest.raises(ValueError, match=r"dev.tags:1 has 3 tags for 2 MT words"):
        load_mlqe(mlqe_dir, language_pairs="ro-en", split="dev")
    (pe / "dev.tags").write_text("OK MAYBE OK OK OK\n")
    with pytest.raises(ValueError, match="tag 'MAYBE'"):
        load_mlqe(mlqe_dir, language_pairs="ro-en", split="dev")
    (pe / "dev.mt").write_text("a cat\nextra line\n")
    with pytest.raises(ValueError, match="2 lines but .* has 1 rows"):
        load_mlqe(mlqe_dir, language_pairs="ro-en", split="dev")


def test_missing_score_column_and_empty_file(mlqe_dir):
    tsv = mlqe_dir / "direct-assessments" / "ro-en" / "dev" / "dev.roen.df.short.tsv"
    tsv.write_text("index\toriginal\ttranslation\tmean\n0\ta\tb\t1.0\n")
    with pytest.raises(ValueError, match=r"column 'z_mean' not found.*available columns"):
        load_mlqe(mlqe_dir, language_pairs="ro-en", split="dev")
    tsv.write_text(HEADER + "\n")
    with pytest.raises(ValueError, match="is empty"):
        load_mlqe(mlqe_dir, language_pairs="ro-en", split="dev")
