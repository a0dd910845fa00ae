import numpy as np
import pytest

from smat.store.render import plot_head_weights, render_html


def test_render_html_shades_tokens_and_hides_special(tmp_path):
    tokens = [["[CLS]", "good", "<b>", "[SEP]"]]
    show = np.array([[False, True, True, False]])
    page = render_html(tmp_path / "p.html", tokens, {"a": np.array([[9.0, 2.0, 0.0, 9.0]])},
                       show=show, titles=["t & u"]).read_text()
    assert "[CLS]" not in page and "&lt;b&gt;" in page and "t &amp; u" in page
    # the most salient shown token is fully coloured; the other gets softmax share / max
    assert "rgba(220, 50, 32, 1.000)'>good" in page
    assert f"rgba(220, 50, 32, {np.exp(-2.0):.3f})'>&lt;b&gt;" in page


def test_render_html_errors(tmp_path):
    with pytest.raises(ValueError, match="at least one explainer"):
        render_html(tmp_path / "p.html", [["a"]], {}, show=np.ones((1, 1), bool))
    with pytest.raises(ValueError, match=r"shape \(1, 2\), expected \(1, 1\)"):
        render_html(tmp_path / "p.html", [["a"]], {"x": np.ones((1, 2))},
                    show=np.ones((1, 1), bool))


def test_plot_head_weights(tmp_path):
    path = plot_head_weights(np.eye(3)[:2], tmp_path / "h.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="layers, heads"):
        plot_head_weights(np.ones(3), tmp_path / "x.png")
