"""What a topic run over real news pages STORES, scored page by page: the full figures of the end-to-end
fidelity test (tests/test_fidelity_e2e.py holds the thresholds; tests/fidelity.py runs and scores both).

    .venv/bin/python benchmarks/eval_fidelity.py [--data DIR] [--workdir DIR] [--no-pages]

The news corpus (tests/shared_data.py: expected.jsonl and its gzipped pages) is written to a WARC, each
page an HTTP response under its URL, and replayed through `topicmap topic run` for a topic whose query
matches about half of the extracted stories (its NOT clause names words found in the raw HTML of some
relevant pages), every page a seed URL judged by the query; then a second topic whose query matches
everything stores the pages the first did not, so every page's stored story can be compared.

Anchor, same run: ``extract_story`` (the extractor benchmarks/eval_extraction.py scores) on the same bytes
and URL, judged by the same relevance rule, and scored with eval_extraction's metrics on the same pages.
Goals: no relevant story missing from the topic (sentence claims within a medium and week are counted apart:
Media Cloud's rule, not a loss), no stored field differing from the extractor's, stored scores no lower.

Prints the tables, then one line per page at fault (``--no-pages`` leaves that out). ``--workdir`` keeps the
WARC, the topics file and the run's TOPICMAP_HOME (store, exports, Dagster instance) for a look afterwards;
by default they go to a temporary folder that is removed. Skips cleanly (exit 0) when the corpus is absent.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fidelity import corpus_available, markdown, page_listing, run_and_evaluate  # noqa: E402
from tests.shared_data import NEWS_HTML  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--data", type=Path, default=NEWS_HTML, help="the news corpus (expected.jsonl)")
    arguments.add_argument("--workdir", type=Path, help="keep the run's files here (an empty or new folder)")
    arguments.add_argument("--no-pages", action="store_true", help="leave out the list of pages at fault")
    options = arguments.parse_args(argv)
    if not corpus_available(options.data):
        print(f"skipped: no news corpus at {options.data}")
        return 0
    if options.workdir is not None:
        if options.workdir.exists() and any(options.workdir.iterdir()):
            arguments.error(f"--workdir {options.workdir} is not empty: a run needs a fresh store")
        report = run_and_evaluate(options.workdir, options.data)
    else:
        with tempfile.TemporaryDirectory(prefix="eval_fidelity_") as folder:
            report = run_and_evaluate(Path(folder), options.data)
    print(markdown(report))
    if not options.no_pages:
        print()
        print(page_listing(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
