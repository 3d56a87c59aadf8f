"""World-time parsing and relative-time resolution ("yesterday" said on 8 May 2023 → 2023-05-07).

Used by construction (event times) and by the offline responder (when-questions), so both agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
MONTHS.update({k[:3]: v for k, v in list(MONTHS.items())})
MONTHS["sept"] = 9
# weekday names and the short forms people type ("last Tues") -> date.weekday(); not "sun", which after
# "this"/"next" is as often the sun
WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6,
            "mon": 0, "tue": 1, "tues": 1, "wed": 2, "weds": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "few": 3, "couple of": 2, "a couple of": 2, "several": 3}

_MON = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MON},?\s+(\d{{4}})\b", re.I)
_MDY = re.compile(rf"\b{_MON}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
# numeric dates as people type them: "16.01.2024" (day first, as in most of Europe), "1/16/2024" (month
# first, as in the US, unless the first number cannot be a month: "16/01/2024")
_DOTTED = re.compile(r"(?<![\w.])(\d{1,2})\.(\d{1,2})\.(\d{4})(?![\d.]\d)")
_SLASHED = re.compile(r"(?<![\w/])(\d{1,2})/(\d{1,2})/(\d{4})(?![\d/])")
_MY = re.compile(rf"\b{_MON}\s+(\d{{4}})\b", re.I)
# "between August 11 and August 15 2023", "from 3 to 9 June, 2023": a span of days; the first day may leave
# out its year (and its month) and take the second's
_DAY = rf"(?:{_MON}\s+\d{{1,2}}(?:st|nd|rd|th)?|\d{{1,2}}(?:st|nd|rd|th)?(?:\s+(?:of\s+)?{_MON})?)"
_SPAN = re.compile(rf"\b(?:between|from)\s+(?P<a>{_DAY}|{_MON})(?:,?\s+(?P<ay>\d{{4}}))?\s+(?:and|to|until|till|through)\s+"
                   rf"(?P<b>{_DAY}|{_MON}),?\s+(?P<by>\d{{4}})\b", re.I)
_MONTH_IN = re.compile(_MON, re.I)
_YEAR = re.compile(r"\b(?:in|since|during|back in)\s+((?:19|20)\d{2})\b", re.I)

_NUM = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|a few|couple of|a couple of|several)"
_AGO = rf"{_NUM}\s+(day|night|weekend|week|fortnight|month|year)s?\s+ago"  # found by _REL, resolved by _resolve
_REL = re.compile(
    rf"\b((?:the\s+)?day\s+before\s+yesterday|(?:the\s+)?day\s+after\s+tomorrow|"
    rf"(?:the\s+)?(?:week|weekend)\s+before\s+last|"
    rf"yesterday|today|tonight|this morning|this afternoon|this evening|tomorrow|"
    rf"last night|last evening|the other day|recently|(?:last|this|next)\s+christmas|"
    rf"(?:the\s+)?previous\s+(?:week|month|year)|"
    rf"(?:last|this|next|past)\s+(?:week|weekend|month|year|summer|winter|spring|fall|autumn|"
    rf"{'|'.join(sorted(WEEKDAYS, key=len, reverse=True))})|"  # longest first: "thurs" before "thu"
    rf"{_AGO}|"
    rf"(?:the\s+)?(?:day|week|month|year)\s+before|"
    rf"in\s+{_NUM}\s+(?:day|week|month|year)s?)\b(?!-)",  # (?!-): not "next sat-nav"
    re.I,
)


def _month(name: str) -> int:
    return MONTHS[name.lower()[:3]]


def parse_date(text: str | None) -> date | None:
    """An absolute date in LoCoMo style ('1:56 pm on 8 May, 2023'), ISO, 'May 8, 2023', or numeric
    ('16.01.2024' day first; '1/16/2024' month first unless the first number cannot be a month)."""
    if not text:
        return None
    for rx, order in ((_ISO, "ymd"), (_DMY, "dmy"), (_MDY, "mdy"), (_DOTTED, "numeric dmy"), (_SLASHED, "numeric mdy")):
        m = rx.search(text)
        if not m:
            continue
        try:
            if order == "ymd":
                return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            if order == "dmy":
                return date(int(m.group(3)), _month(m.group(2)), int(m.group(1)))
            if order == "mdy":
                return date(int(m.group(3)), _month(m.group(1)), int(m.group(2)))
            a, b, year = int(m.group(1)), int(m.group(2)), int(m.group(3))
            day_first = order == "numeric dmy" or a > 12
            return date(year, b, a) if day_first else date(year, a, b)
        except (ValueError, KeyError):
            continue
    return None


def fmt(d: date) -> str:
    """The human form LoCoMo answers use: '7 May 2023'."""
    return f"{d.day} {d.strftime('%B')} {d.year}"


@dataclass(frozen=True)
class ResolvedTime:
    expression: str
    start: date
    end: date
    label: str  # human phrase, e.g. "7 May 2023", "the week before 8 May 2023", "2022"


def _count(word: str) -> int:
    word = word.lower().strip()
    if word.isdigit():
        return int(word)
    return NUMBERS.get(word, NUMBERS.get(word.replace("a ", ""), 1))


def _shift_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    return date(d.year + y, m + 1, min(d.day, 28))


def resolve(expression: str, anchor: date) -> ResolvedTime | None:
    """A relative expression made absolute against the anchor; None when it cannot be, or when the
    result falls outside the calendar ('5000 years ago', 'yesterday' on 1 January of year 1)."""
    try:
        return _resolve(expression, anchor)
    except (OverflowError, ValueError):
        return None


def _resolve(expression: str, anchor: date) -> ResolvedTime | None:
    e = expression.lower().strip()
    one = timedelta(days=1)
    if e in ("today", "tonight", "this morning", "this afternoon", "this evening"):
        return ResolvedTime(expression, anchor, anchor, fmt(anchor))
    if e in ("yesterday", "last night", "last evening"):
        d = anchor - one
        return ResolvedTime(expression, d, d, fmt(d))
    if e == "tomorrow":
        d = anchor + one
        return ResolvedTime(expression, d, d, fmt(d))
    m = re.fullmatch(r"(?:the\s+)?day\s+(before|after)\s+(?:yesterday|tomorrow)", e)
    if m:
        d = anchor + timedelta(days=-2 if m.group(1) == "before" else 2)
        return ResolvedTime(expression, d, d, fmt(d))
    m = re.fullmatch(r"(?:the\s+)?(week|weekend)\s+before\s+last", e)
    if m:
        return resolve(f"two {m.group(1)}s ago", anchor)
    m = re.fullmatch(r"(?:the\s+)?previous\s+(week|month|year)", e)
    if m:
        return resolve(f"last {m.group(1)}", anchor)
    m = re.fullmatch(r"(last|this|next)\s+christmas", e)
    if m:
        before = anchor < date(anchor.year, 12, 25)  # this year's Christmas still ahead
        y = anchor.year + {"last": -1 if before else 0, "this": 0, "next": 0 if before else 1}[m.group(1)]
        d = date(y, 12, 25)
        return ResolvedTime(expression, d, d, fmt(d))
    m = re.match(r"in\s+" + _NUM + r"\s+(day|week|month|year)s?", e)
    if m:  # ahead of the anchor: "in two weeks we leave"
        n, unit = _count(m.group(1)), m.group(2)
        if unit == "day":
            d = anchor + timedelta(days=n)
            return ResolvedTime(expression, d, d, fmt(d))
        if unit == "week":
            d = anchor + timedelta(weeks=n)
            return ResolvedTime(expression, d, d, f"{m.group(1)} week{'s' * (n > 1)} after {fmt(anchor)}")
        if unit == "month":
            d = _shift_months(anchor, n)
            return ResolvedTime(expression, d, d, f"{d.strftime('%B')} {d.year}")
        return ResolvedTime(expression, date(anchor.year + n, 1, 1), date(anchor.year + n, 12, 31), str(anchor.year + n))
    m = re.match(_AGO, e)
    if m:
        n, unit = _count(m.group(1)), m.group(2)
        if unit == "fortnight":  # said as the speaker counted, as weeks are
            d = anchor - timedelta(weeks=2 * n)
            return ResolvedTime(expression, d, d, f"{m.group(1)} fortnight{'s' * (n > 1)} before {fmt(anchor)}")
        if unit in ("day", "night"):
            d = anchor - timedelta(days=n)
            return ResolvedTime(expression, d, d, fmt(d))
        if unit in ("week", "weekend"):  # said as the speaker counted: "two weekends before 17 July 2023"
            d = anchor - timedelta(weeks=n)
            return ResolvedTime(expression, d, d, f"{m.group(1)} {unit}{'s' * (n > 1)} before {fmt(anchor)}")
        if unit == "month":
            d = _shift_months(anchor, -n)
            return ResolvedTime(expression, d, d, f"{d.strftime('%B')} {d.year}")
        return ResolvedTime(expression, date(anchor.year - n, 1, 1), date(anchor.year - n, 12, 31), str(anchor.year - n))
    m = re.match(r"(last|this|next|past)\s+(\w+)", e)
    if m:
        which, unit = m.group(1), m.group(2)
        sign = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
        if unit in WEEKDAYS:
            target = WEEKDAYS[unit]
            delta = (anchor.weekday() - target) % 7 or 7
            d = anchor - timedelta(days=delta) if sign <= 0 else anchor + timedelta(days=((target - anchor.weekday()) % 7 or 7))
            return ResolvedTime(expression, d, d, fmt(d))
        if unit in ("week", "weekend"):
            if sign == 0:
                return ResolvedTime(expression, anchor, anchor, f"the week of {fmt(anchor)}")
            start = anchor + timedelta(weeks=sign) - timedelta(days=anchor.weekday())
            end = start + timedelta(days=6)
            side = "before" if sign < 0 else "after"
            return ResolvedTime(expression, start, end, f"the {unit} {side} {fmt(anchor)}")
        if unit == "month":
            d = _shift_months(anchor, sign)
            return ResolvedTime(expression, d.replace(day=1), d, f"{d.strftime('%B')} {d.year}")
        if unit == "year":
            y = anchor.year + sign
            return ResolvedTime(expression, date(y, 1, 1), date(y, 12, 31), str(y))
        if unit in ("summer", "winter", "spring", "fall", "autumn"):
            y = anchor.year + (sign if sign != 0 else 0)
            if sign < 0 and unit == "summer" and anchor.month > 8:
                y = anchor.year
            if unit == "winter":  # "winter 2022" runs from December 2022 into February 2023
                return ResolvedTime(expression, date(y, 12, 1), date(y + 1, 2, 28), f"{unit} {y}")
            first = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9}[unit]  # meteorological seasons
            return ResolvedTime(expression, date(y, first, 1), date(y, first + 2, 30), f"{unit} {y}")
    m = re.match(r"(?:the\s+)?(day|week|month|year)\s+before", e)
    if m:
        return resolve(f"{'yesterday' if m.group(1) == 'day' else 'last ' + m.group(1)}", anchor)
    if e in ("recently", "the other day"):
        d = anchor - timedelta(days=3)
        return ResolvedTime(expression, d, anchor, f"shortly before {fmt(anchor)}")
    return None


def find_expressions(text: str) -> list[str]:
    """Relative and absolute time expressions in a text, in order of appearance."""
    found: list[tuple[int, str]] = [(m.start(), m.group(0)) for m in _REL.finditer(text)]
    for rx in (_DMY, _MDY, _ISO, _DOTTED, _SLASHED, _MY, _YEAR):
        found += [(m.start(), m.group(0)) for m in rx.finditer(text)]
    found.sort()
    out: list[str] = []
    for _, s in found:
        if s not in out:
            out.append(s)
    return out


def resolve_in_text(text: str, anchor: date | None) -> ResolvedTime | None:
    """The first time expression in a text, made absolute against the anchor when relative."""
    for expr in find_expressions(text):
        absolute = parse_date(expr)
        if absolute:
            return ResolvedTime(expr, absolute, absolute, fmt(absolute))
        m = _MY.fullmatch(expr)
        if m:
            mon = _month(m.group(1))
            return ResolvedTime(expr, date(int(m.group(2)), mon, 1), date(int(m.group(2)), mon, 28),
                                f"{m.group(1).capitalize()} {m.group(2)}")
        m = _YEAR.fullmatch(expr)
        if m:
            y = int(m.group(1))
            return ResolvedTime(expr, date(y, 1, 1), date(y, 12, 31), str(y))
        if anchor is not None:
            r = resolve(expr, anchor)
            if r:
                return r
    return None


def named_period(text: str, slack_days: int = 0) -> tuple[date, date] | None:
    """The calendar period a text names outright — a day ("on October 13, 2023", "29 Dec 2023") or a
    month ("in July 2023") — as (first day, last day), widened by `slack_days` on each side; None when it
    names none (a relative expression needs a date to count from, and a question asked of a memory has
    none). A span of days ("between August 11 and August 15 2023") is that span, not its last day."""
    period = _span(text) or _period_of(text)
    if period is None:
        return None
    first, last = period
    slack = timedelta(days=slack_days)
    try:
        return first - slack, last + slack
    except OverflowError:  # at the ends of the calendar
        return first, last


def _span(text: str) -> tuple[date, date] | None:
    """The span a text names from one day or month to another, None when none or when it runs backwards."""
    m = _SPAN.search(text)
    if not m:
        return None
    a, b = m["a"], m["b"]
    month_a, month_b = _MONTH_IN.search(a), _MONTH_IN.search(b)
    if month_b and not month_a:  # "from 3 to 9 June": the first day takes the second's month
        a = f"{a} {month_b.group(0)}"
    elif month_a and not month_b:  # "from June 3 to 9": the second day takes the first's
        b = f"{month_a.group(0)} {b}"
    end = _period_of(f"{b} {m['by']}")
    start = _period_of(f"{a} {m['ay'] or m['by']}")
    if start is None or end is None or start[0] > end[1]:
        return None
    return start[0], end[1]


def _period_of(text: str) -> tuple[date, date] | None:
    """The first day a text names with its year, else the first month, as (first day, last day)."""
    day = parse_date(text)
    if day:
        return day, day
    m = _MY.search(text)
    if not m:
        return None
    try:
        first = date(int(m.group(2)), _month(m.group(1)), 1)
        return first, _shift_months(first, 1) - timedelta(days=1)
    except (ValueError, OverflowError):  # "May 0000", "December 9999"
        return None


def iso(d: date | None) -> str | None:
    return d.isoformat() if d else None


def from_iso(s: str | None) -> date | None:
    if not s:
        return None
    try:
        return datetime.fromisoformat(s).date()
    except ValueError:
        return None
