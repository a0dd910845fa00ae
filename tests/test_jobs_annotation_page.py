"""The annotation page in a real headless browser (Debian's chromium + chromedriver):
answer by clicking and by keyboard, reload mid-way, download the answers, compare."""

import csv
import json
import shutil
import time

import pytest

from smat.evaluation.human_study import DONT_KNOW
from smat.jobs.annotation_page import annotation_page, write_annotation_pages

TASKS = [{"task_id": f"t{i}", "text": f"a . great {i} . film </script>", "classes": ["neg", "pos"]}
         for i in range(5)]


def test_pages_per_package_and_bad_input(tmp_path):
    study = {"tasks": TASKS, "packages": [
        {"annotator": a, "position": p, "task_id": f"t{t}"}
        for p, (a, t) in enumerate([(0, 0), (0, 1), (1, 2), (1, 0)])]}
    pages = write_annotation_pages(study, tmp_path)
    assert [p.name for p in pages] == ["annotator0.html", "annotator1.html"]
    page = pages[1].read_text()
    assert page.index('"t2"') < page.index('"t0"')  # the package's own order
    assert "</script> " not in page.split('type="application/json">')[1].split("</script>\n")[0]
    with pytest.raises(ValueError, match="has no tasks"):
        annotation_page([], worker="w", study="s")


def _browser(download_dir):
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed (make test "
                    "installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": str(download_dir),
                                              "download.prompt_for_download": False})
    from selenium.webdriver.chrome.service import Service

    browser = webdriver.Chrome(service=Service(driver), options=options)
    browser.execute_cdp_cmd("Page.setDownloadBehavior",
                            {"behavior": "allow", "downloadPath": str(download_dir)})
    return browser


def _wait_for(path, seconds=10.0):
    end = time.time() + seconds
    while time.time() < end:
        if path.is_file() and path.stat().st_size > 0:
            return path
        time.sleep(0.1)
    raise AssertionError(f"{path} was not downloaded")


def test_answer_reload_and_download_in_a_real_browser(tmp_path):
    from selenium.webdriver.common.by import By

    page = tmp_path / "page.html"
    page.write_text(annotation_page(TASKS, worker="w1", study="demo"))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser = _browser(downloads)
    try:
        browser.get(page.as_uri())
        assert "Task 1 of 5" in browser.find_element(By.ID, "progress").text
        assert "great 0" in browser.find_element(By.ID, "text").text
        browser.find_element(By.CSS_SELECTOR, '#choices button[data-answer="pos"]').click()
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys("1")  # t1: the first class, "neg"
        body.send_keys("0")  # t2: I don't know
        browser.refresh()  # nothing is lost
        assert "Task 4 of 5 (3 answered)" in browser.find_element(By.ID, "progress").text
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys("\b")  # back to t2, answer it again
        assert "great 2" in browser.find_element(By.ID, "text").text
        browser.find_element(By.CSS_SELECTOR, '#choices button[data-answer="neg"]').click()
        body.send_keys("2")  # t3: pos
        browser.find_element(By.CSS_SELECTOR, '#choices button[data-answer="neg"]').click()
        assert browser.find_element(By.ID, "done").is_displayed()
        browser.find_element(By.ID, "download-csv").click()
        rows = list(csv.DictReader(_wait_for(downloads / "answers-w1.csv").read_text()
                                   .splitlines()))
        browser.find_element(By.ID, "download-json").click()
        saved = json.loads(_wait_for(downloads / "answers-w1.json").read_text())
        browser.save_screenshot(str(tmp_path / "page.png"))
    finally:
        browser.quit()
    expected = {"t0": "pos", "t1": "neg", "t2": "neg", "t3": "pos", "t4": "neg"}
    assert {r["task_id"]: r["answer"] for r in rows} == expected
    assert {r["task_id"]: r["answer"] for r in saved} == expected
    assert all(r["worker"] == "w1" and float(r["seconds"]) >= 0 for r in rows)
    assert DONT_KNOW not in {r["answer"] for r in rows}  # t2's first answer was replaced
    assert (tmp_path / "page.png").stat().st_size > 0
