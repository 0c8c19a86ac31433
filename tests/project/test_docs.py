"""The documentation as a reader follows it: every link of the README, of docs/ and of benchmarks/
names a file of this repository that exists (and one of its headings, for an anchor); the pages say
what is and how to use it, with one short table of results whose rows give their command and link
their record in benchmarks/, where the experiments are kept, one dated file per study."""
import re
from pathlib import Path
from locations import ROOT

BENCHMARKS = ROOT / "benchmarks"
DOCS = sorted((ROOT / "docs").glob("*.md"))
RECORDS = sorted(path for path in BENCHMARKS.glob("*.md") if path.name != "README.md")
PAGES = [path for path in (ROOT / "README.md", *DOCS, BENCHMARKS / "README.md", *RECORDS) if path.exists()]
MAX_LINES = {"docs/evokit.md": 350, "docs/cluster.md": 350}  # they were lab notebooks of 980 and 741 lines

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
RECORD_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")


def _prose(path: Path) -> str:
    """The Markdown of ``path`` without its code blocks (what a renderer turns into links and headings)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _links(path: Path) -> list[str]:
    return LINK.findall(CODE_SPAN.sub("", _prose(path)))


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``path`` (lower case, punctuation dropped, spaces as
    hyphens, a repeated one numbered)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", _prose(path), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_the_pages_that_were_lab_notebooks_stay_short():
    for name, limit in MAX_LINES.items():
        lines = (ROOT / name).read_text(encoding="utf-8").count("\n")
        assert lines <= limit, (f"{name} has {lines} lines, more than {limit}: move the record of an experiment to "
                                f"benchmarks/ and link it from the page's results table")


def test_every_link_names_a_file_of_the_repository_that_exists():
    """A file outside the clone (an absolute path, or ../ past its root) is not there for a reader of
    the repository; a benchmarks/ link names a record that exists; an anchor names a heading."""
    wrong = []
    for page in PAGES:
        for target in _links(page):
            if SCHEME.match(target):
                continue
            name, _, anchor = target.partition("#")
            file = (page.parent / name).resolve() if name else page
            where = f"{_rel(page)}: ({target})"
            if not file.is_relative_to(ROOT):
                wrong.append(f"{where} points outside the repository")
            elif not file.exists():
                wrong.append(f"{where} names {_rel(file)}, which does not exist")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                wrong.append(f"{where}: {_rel(file)} has no heading #{anchor}")
    assert not wrong, "\n".join(wrong)


def _results_rows(page: Path) -> list[str]:
    text = _prose(page)
    start = text.index("\n## Results\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end != -1 else None]
    return [row for row in section.splitlines() if row.startswith("| ") and not row.startswith("| what |")]


def test_every_result_gives_its_command_and_links_its_record():
    """The pages that report measurements: one table of results, each row with the command that
    reproduces it and a link to its record in benchmarks/."""
    pages = [page for page in DOCS if "\n## Results\n" in page.read_text(encoding="utf-8")]
    assert {"evokit.md", "ars.md", "cluster.md"} <= {page.name for page in pages}
    for page in pages:
        rows = _results_rows(page)
        assert rows, f"{_rel(page)}: its Results section has no table"
        for row in rows:
            records = [target for target in LINK.findall(row) if target.startswith("../benchmarks/")]
            assert CODE_SPAN.search(row) and records, f"{_rel(page)}: a result without its command or record: {row}"


def test_no_page_keeps_the_json_lines_of_its_experiments():
    for page in DOCS:
        text = page.read_text(encoding="utf-8")
        assert "```json" not in text, f"{_rel(page)}: JSON lines belong to the record in benchmarks/"
        crowded = [line for line in text.splitlines() if line.count('": ') >= 5]
        assert not crowded, f"{_rel(page)}: a JSON line of figures belongs to its record: {crowded[0][:80]}"


def test_every_record_is_dated_says_what_was_run_and_is_linked_from_a_page():
    index = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    cited = {(page.parent / target.partition("#")[0]).resolve()
             for page in [ROOT / "README.md", *DOCS] for target in _links(page)}
    assert len(RECORDS) >= 20
    for record in RECORDS:
        text = record.read_text(encoding="utf-8")
        assert RECORD_NAME.match(record.name), f"{_rel(record)}: name it YYYY-MM-DD-what.md"
        for field in ("Date", "Command", "Machine", "Conclusion"):
            assert f"\n- **{field}**: " in text, f"{_rel(record)} does not give its {field.lower()}"
        assert f"]({record.name})" in index, f"benchmarks/README.md does not list {record.name}"
        assert record in cited, f"no page of docs/ links {_rel(record)}"
