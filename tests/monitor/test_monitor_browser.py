"""The monitor page in a real headless Chromium (Debian's `chromium`), driven over the DevTools
protocol: the tables fill, an actor's printed line appears, a killed actor turns dead, all without
reloading the page; a screenshot is written."""
import json
import os
import shutil
import signal

import pytest

from monitor_helpers import MonitorProcess, UserScript, rows_js

pytestmark = pytest.mark.timeout(120)


def test_the_page_shows_a_pool_live(tmp_path, browser):
    script = UserScript(tmp_path)
    monitor = MonitorProcess("--pid", str(script.info["pid"]))  # other pools may run on this machine
    try:
        pid = script.info["pid"]
        browser.open(monitor.url)
        browser.evaluate("window.notReloaded = true")

        browser.wait_for(f"{rows_js('actors', f'{pid}-')}.length === 3 && {rows_js('clients', str(pid))}.length === 1")
        counts = browser.evaluate("['#nodes', '#clients', '#actors']"
                                  ".map(t => document.querySelectorAll(t + ' tbody tr').length)")
        assert counts == [1, 1, 3]
        assert browser.evaluate("document.getElementById('actor-count').textContent") == "3"
        cells = browser.evaluate(f"[...{rows_js('clients', str(pid))}[0].cells].map(c => c.textContent)")
        assert cells[0].endswith("user_script.py") and cells[2] == str(pid) and cells[4] == "3"
        classes = browser.evaluate(f"[...{rows_js('actors', f'{pid}-')}].map(r => r.cells[0].textContent).sort()")
        assert classes == ["Counter", "Counter", "Talker"]
        assert browser.evaluate("document.querySelector('#nodes svg polyline') !== null")

        # choose the talker, make it print: the line appears in the output panel
        talker = script.actor_id(script.info["talker"])
        browser.evaluate(f"document.querySelector('tr[data-actor=\"{talker}\"]').click()")
        script.send("say a line printed by the actor")
        browser.wait_for("document.getElementById('log').textContent.includes('a line printed by the actor')")
        download = browser.evaluate("document.getElementById('log-download').getAttribute('href')")
        assert download == f"/api/logs/{talker}?download=1"
        script.send("fail")
        browser.wait_for(f"document.querySelector('tr[data-actor=\"{talker}\"] td.error')"
                         ".textContent === 'ValueError: the input was bad'")

        # kill a counter: its row turns dead, the other actors stay alive
        killed = script.actor_id(script.info["counters"][0])
        os.kill(script.info["counters"][0], signal.SIGKILL)
        browser.wait_for(f"document.querySelector('tr[data-actor=\"{killed}\"]').dataset.state === 'dead'")
        states = browser.evaluate(f"[...{rows_js('actors', f'{pid}-')}].map(r => r.dataset.state).sort()")
        assert states == ["alive", "alive", "dead"]
        assert browser.evaluate(f"document.querySelector('tr[data-actor=\"{killed}\"] .state').textContent") == "dead"
        assert browser.evaluate("window.notReloaded") is True  # refreshed in place

        screenshot = tmp_path / "monitor.png"
        browser.screenshot(screenshot)
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
        if os.environ.get("PARL_LITE_MONITOR_SCREENSHOT"):  # to refresh the README's picture
            shutil.copy(screenshot, os.environ["PARL_LITE_MONITOR_SCREENSHOT"])
        shown = json.loads(browser.evaluate("JSON.stringify([...document.querySelectorAll('#actors tbody tr')]"
                                            ".map(r => r.dataset.actor))"))
        assert killed in shown and talker in shown
    finally:
        monitor.stop()
        script.quit()


def test_off_loopback_the_page_asks_for_the_token(tmp_path, browser):
    script = UserScript(tmp_path)
    monitor = MonitorProcess("--host", "127.0.0.2", "--pid", str(script.info["pid"]))
    try:
        browser.open(monitor.url)
        assert browser.evaluate("document.querySelector('input[name=token]') !== null")
        browser.evaluate("document.querySelector('input[name=token]').value = 'wrong'")
        browser.submit("form")
        assert browser.evaluate("document.body.textContent.includes('not right')")
        browser.evaluate(f"document.querySelector('input[name=token]').value = {json.dumps(monitor.token)}")
        browser.submit("form")
        browser.wait_for("document.querySelectorAll('#actors tbody tr').length === 3")
        assert browser.evaluate("document.cookie") == ""  # the session cookie is HttpOnly
    finally:
        monitor.stop()
        script.quit()
