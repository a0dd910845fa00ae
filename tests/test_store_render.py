import numpy as np
import pytest

from smat.store.render import merge_word_pieces, plot_head_weights, render_html


def test_render_html_shades_tokens_and_hides_special(tmp_path):
    tokens = [["[CLS]", "good", "<b>", "[SEP]"]]
    show = np.array([[False, True, True, False]])
    page = render_html(tmp_path / "p.html", tokens, {"a": np.array([[9.0, 2.0, 0.5, 9.0]])},
                       show=show, titles=["t & u"]).read_text()
    assert "[CLS]" not in page and "&lt;b&gt;" in page and "t &amp; u" in page
    # undeclared non-negative scores: a magnitude, sequential orange from zero, the row's
    # largest fully coloured, the rest in proportion
    assert "title='2' style='background: rgba(204, 102, 0, 1.000)'>good" in page
    assert "title='0.5' style='background: rgba(204, 102, 0, 0.250)'>&lt;b&gt;" in page
    assert "<b>a</b>: importance, sequential from zero" in page


def test_signed_scores_diverge_around_zero_and_small_ranges_still_show(tmp_path):
    """Integrated-gradient-like scores between -0.008 and 0.033 (the old page painted them
    all nearly full red, as a softmax of tiny scores is nearly uniform)."""
    tokens = [["[CLS]", "not", "bad", "film", "[SEP]"]]
    show = np.array([[False, True, True, True, False]])
    scores = np.array([[0.0, -0.008, 0.033, 0.0, 0.0]])
    page = render_html(tmp_path / "p.html", tokens, {"ig": scores}, show=show).read_text()
    assert "rgba(40, 90, 200, 0.242)'>not" in page  # blue, |-0.008| / 0.033
    assert "rgba(220, 50, 32, 1.000)'>bad" in page
    assert "rgba(220, 50, 32, 0.000)'>film" in page  # zero is white
    assert "<b>ig</b>: signed attribution, diverging around zero" in page


def test_attention_is_drawn_as_its_distribution_never_as_negative_evidence(tmp_path):
    """Pooled attention logits are all negative here; drawn as what they stand for, the
    softmax over the row's words, the most attended word is the darkest and none is blue."""
    tokens = [["[CLS]", "as", "it", "is", "[SEP]"]]
    show = np.array([[False, True, True, True, False]])
    logits = np.array([[-5.0, -0.67, -2.0, -3.0, -5.0]])
    page = render_html(tmp_path / "p.html", tokens, {"attention_all": logits}, show=show,
                       kinds={"attention_all": "attention"}).read_text()
    shares = np.exp([-0.67, -2.0, -3.0]) / np.exp([-0.67, -2.0, -3.0]).sum()
    assert f"title='{shares[0]:.4g}' style='background: rgba(118, 42, 131, 1.000)'>as" in page
    assert (f"rgba(118, 42, 131, {shares[1] / shares[0]:.3f})'>it") in page
    assert "rgba(40, 90, 200" not in page.split("</style>")[1].split("class='example'")[1]
    assert "<b>attention_all</b>: attention distribution" in page
    # the same scores undeclared would be drawn as (all negative) attribution: the defect
    wrong = render_html(tmp_path / "w.html", tokens, {"attention_all": logits},
                        show=show).read_text()
    assert "rgba(40, 90, 200, 1.000)'>is" in wrong
    with pytest.raises(ValueError, match="unknown kinds of scores"):
        render_html(tmp_path / "x.html", tokens, {"a": logits}, show=show,
                    kinds={"a": "probability"})


def test_word_pieces_merge_into_words_with_summed_scores(tmp_path):
    tokens = [["[CLS]", "spec", "##ter", "was", "great", "[SEP]"]]
    show = np.array([[False, True, True, True, True, False]])
    scores = np.array([[0.0, 0.25, 0.5, 0.1, 1.0, 0.0]])
    page = render_html(tmp_path / "w.html", tokens, {"a": scores}, show=show).read_text()
    assert "title='0.75' style='background: rgba(204, 102, 0, 0.750)'>specter" in page
    assert "##ter" not in page
    pieces = render_html(tmp_path / "p.html", tokens, {"a": scores}, show=show,
                         word_pieces=True).read_text()
    assert ">spec</span>" in pieces and ">##ter</span>" in pieces
    # sentencepiece / byte-level BPE mark word starts instead of continuations
    words, sums = merge_word_pieces(["\u2581un", "believ", "able", "\u2581film"],
                                    np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4, bool))
    assert words == ["unbelievable", "film"] and sums.tolist() == [6.0, 4.0]


def test_render_html_errors(tmp_path):
    with pytest.raises(ValueError, match="at least one explainer"):
        render_html(tmp_path / "p.html", [["a"]], {}, show=np.ones((1, 1), bool))
    with pytest.raises(ValueError, match=r"shape \(1, 2\), expected \(1, 1\)"):
        render_html(tmp_path / "p.html", [["a"]], {"x": np.ones((1, 2))},
                    show=np.ones((1, 1), bool))


def test_plot_head_weights_centres_on_uniform_and_keeps_noise_pale(tmp_path):
    from smat.store.render import head_weights_scale

    path = plot_head_weights(np.eye(3)[:2], tmp_path / "h.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    # coefficients within 0.005 of uniform (1/72) are drawn on 0 .. 2/72, so the noise
    # stays pale instead of spanning the whole colour map
    near = np.full((6, 12), 1 / 72)
    near[0, 0], near[5, 11] = 1 / 72 + 0.005, 1 / 72 - 0.005
    np.testing.assert_allclose(head_weights_scale(near), (0.0, 2 / 72))
    # a sparse solution widens the scale, still centred on uniform
    sparse = np.zeros((6, 12))
    sparse[3, :4] = 0.25
    low, high = head_weights_scale(sparse)
    np.testing.assert_allclose((low + high) / 2, 1 / 72)
    np.testing.assert_allclose(high, 0.25)
    with pytest.raises(ValueError, match="layers, heads"):
        plot_head_weights(np.ones(3), tmp_path / "x.png")


def test_patch_heatmap_fills_each_patch_block_in_row_major_order():
    from smat.store.render import patch_heatmap

    heat = patch_heatmap(np.array([0.0, 2.0, -1.0, 4.0]), image_size=4)  # a 2 x 2 grid
    np.testing.assert_array_equal(heat, [[0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5],
                                         [-0.25, -0.25, 1, 1], [-0.25, -0.25, 1, 1]])
    np.testing.assert_array_equal(patch_heatmap(np.zeros(4), image_size=2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="one square grid"):
        patch_heatmap(np.zeros(3), image_size=6)
    with pytest.raises(ValueError, match="not a multiple"):
        patch_heatmap(np.zeros(4), image_size=5)


def test_plot_patch_saliency_writes_one_row_per_image(tmp_path):
    from PIL import Image

    from smat.store.render import plot_patch_saliency

    images = np.random.default_rng(0).random((2, 16, 16, 3))
    scores = {"gradient": np.abs(np.random.default_rng(1).normal(size=(2, 16))),
              "attention_all": np.eye(2, 16)}
    path = plot_patch_saliency(images, scores, tmp_path / "grid.png", titles=["cat", "dog"],
                               kinds={"attention_all": "attention"})
    with Image.open(path) as png:
        width, height = png.size
    # 3 columns x 2 rows at 2.0 x 2.1 inches and a row of colour bars, 100 dpi
    assert width == 600 and height == 510
    with pytest.raises(ValueError, match="1 rows of scores for 2 images"):
        plot_patch_saliency(images, {"gradient": scores["gradient"][:1]}, tmp_path / "x.png")


def test_render_image_html_overlays_one_cell_per_patch_and_checks_shapes(tmp_path):
    from smat.store.render import render_image_html

    images = np.random.default_rng(0).random((2, 8, 8, 3))
    scores = {"gradient": np.array([[1.0, 0.5, 0.0, 0.25], [0.0, 0.0, 2.0, 0.0]]),
              "input_x_gradient": np.array([[-1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])}
    page = render_image_html(tmp_path / "p.html", images, scores,
                             titles=["first", "<second>"],
                             kinds={"gradient": "magnitude"}).read_text()
    assert page.count("class='patch'") == 2 * 2 * 4
    assert "repeat(2, 1fr)" in page  # a 2 x 2 grid of patches
    # shades relative to each image's largest absolute score; blue below zero
    assert "title='1' style='background: rgba(204, 102, 0, 0.750)'" in page
    assert "title='0.25' style='background: rgba(204, 102, 0, 0.188)'" in page
    assert "title='-1' style='background: rgba(40, 90, 200, 0.750)'" in page
    assert "<b>gradient</b>: importance" in page and "<b>input_x_gradient</b>: signed" in page
    assert "&lt;second&gt;" in page and "<second>" not in page
    with pytest.raises(ValueError, match="expected \\(2, patches\\) of a square patch grid"):
        render_image_html(tmp_path / "x.html", images, {"gradient": np.ones((2, 3))})
    with pytest.raises(ValueError, match="images must be"):
        render_image_html(tmp_path / "x.html", images[..., 0], scores)
    with pytest.raises(ValueError, match="at least one explainer"):
        render_image_html(tmp_path / "x.html", images, {})


def test_long_explainer_names_are_cut_from_their_end_for_figure_titles():
    from smat.store.render import short_label

    assert short_label("gradient") == "gradient"
    folder = "runs/digits/students/n240/smat/seed2/explainer"
    label = short_label(folder)
    assert len(label) == 24 and label.startswith("...") and folder.endswith(label[3:])
