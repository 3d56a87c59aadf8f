from datetime import date, timedelta
from pathlib import Path

import pytest

from compassmem.timeutil import find_expressions, named_period, parse_date, resolve_in_text

ANCHOR = date(2023, 5, 8)


@pytest.mark.parametrize("text, expected", [
    ("1:56 pm on 8 May, 2023", date(2023, 5, 8)),
    ("2023-07-01", date(2023, 7, 1)),
    ("on June 5th, 2022", date(2022, 6, 5)),
    ("Where is Paola planning to go on 16.01.2024?", date(2024, 1, 16)),  # dotted: day first
    ("on 10.01.2024", date(2024, 1, 10)),
    ("on 1/16/2024", date(2024, 1, 16)),  # slashed: month first
    ("on 16/01/2024", date(2024, 1, 16)),  # ... unless the first number cannot be a month
    ("python v3.11.2023", None),  # a version, not a date
    ("31.02.2024", None),  # no such day
    ("no date", None),
])
def test_parse_date(text, expected):
    assert parse_date(text) == expected


@pytest.mark.parametrize("text, label", [
    ("I went yesterday", "7 May 2023"),
    ("we ran last week", "the week before 8 May 2023"),
    ("two days ago I painted", "6 May 2023"),
    ("I painted that last year", "2022"),
    ("last Saturday was fun", "6 May 2023"),
    ("back in 2019 we moved", "2019"),
    ("next month we travel", "June 2023"),
    ("I joined a new group last Tues. It's great", "2 May 2023"),  # 8 May 2023 is a Monday
    ("last Fri I went to a council meeting", "5 May 2023"),
    ("we went camping two weekends ago", "two weekends before 8 May 2023"),
    ("a few weeks ago I moved", "a few weeks before 8 May 2023"),  # not an invented count
])
def test_relative_times_become_absolute(text, label):
    assert resolve_in_text(text, ANCHOR).label == label


def test_expressions_in_order():
    assert find_expressions("Yesterday I said that last year was hard") == ["Yesterday", "last year"]


def test_numeric_dates_are_expressions():
    assert find_expressions("we met on 16.01.2024, then 1/20/2024") == ["16.01.2024", "1/20/2024"]
    assert resolve_in_text("Paola flies on 16.01.2024", None).label == "16 January 2024"


def test_the_sun_is_not_sunday():
    assert find_expressions("this sun is hot, and the next sat-nav I buy") == []


def _golden() -> list[tuple[str, str | None, str | None]]:
    rows = []
    for line in (Path(__file__).parent / "data" / "time_expressions.tsv").read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        text, *rest = line.split("\t")
        label, start = (rest + [None, None])[:2]
        rows.append((text, label or None, start or None))
    return rows


GOLDEN = _golden()


def test_the_golden_file_is_big_enough():
    assert len(GOLDEN) >= 80


@pytest.mark.parametrize("text, label, start", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_time_expressions(text, label, start):
    """Each expression as a reader would resolve it on Monday 8 May 2023: the label an answer shows and
    the day its span starts (tests/data/time_expressions.tsv)."""
    r = resolve_in_text(text, ANCHOR)
    if label is None:
        assert r is None
        return
    assert r is not None and r.label == label
    assert r.start.isoformat() == start


@pytest.mark.parametrize("text, period", [
    ("What did Melanie paint on October 13, 2023?", (date(2023, 10, 13), date(2023, 10, 13))),
    ("What kind of pasta did Kate make on 29 Dec 2023?", (date(2023, 12, 29), date(2023, 12, 29))),
    ("What did Kevin watch on the night of 10.01.2024?", (date(2024, 1, 10), date(2024, 1, 10))),
    ("What did Mel and her kids paint in July 2023?", (date(2023, 7, 1), date(2023, 7, 31))),
    ("What setback did Melanie face in February 2024?", (date(2024, 2, 1), date(2024, 2, 29))),  # a leap year
    ("What did Tom do in December 2023?", (date(2023, 12, 1), date(2023, 12, 31))),
    ("Where was John between August 11 and August 15 2023?", (date(2023, 8, 11), date(2023, 8, 15))),  # a span
    ("What did Ann do from 3 to 9 June, 2023?", (date(2023, 6, 3), date(2023, 6, 9))),  # the month said once
    ("What did Ann do from June 3 to 9, 2023?", (date(2023, 6, 3), date(2023, 6, 9))),  # the second a bare day
    ("What changed from May 30 to June 2, 2023?", (date(2023, 5, 30), date(2023, 6, 2))),
    ("What did Ann read between 12 August, 2022 and 3 January 2023?", (date(2022, 8, 12), date(2023, 1, 3))),
    ("Where did Ann live from March to May 2023?", (date(2023, 3, 1), date(2023, 5, 31))),  # months
    ("What happened between August 15 and August 11 2023?", (date(2023, 8, 11), date(2023, 8, 11))),  # no span backwards: the day with its year
    ("What did Tom do last week?", None),  # relative: a question asked of a memory has no date to count from
    ("When did Tom run in 2023?", None),  # a year is not a day or a month
    ("What happened in May 0000?", None),  # no such month
    ("What did Ana adopt?", None),
])
def test_the_period_a_question_names(text, period):
    assert named_period(text) == period
    if period:  # widened by the slack on each side
        assert named_period(text, 3) == (period[0] - timedelta(days=3), period[1] + timedelta(days=3))
