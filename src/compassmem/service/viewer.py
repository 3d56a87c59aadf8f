"""The graph viewer: one namespace's Event Graph as a page that works with no network.

Events are drawn on a time axis (x: their date, the gap between dates growing with the days between
them; one lane per topic, labelled by its content words), typed relations as curves coloured by type
(the frequent follow_up / related_to faint until an event is picked), a summary on hover and the source
turns and relations on click. Zoom and pan, a search box and topic / person / relation-type filters
make 100–200 events readable; the view's state can be given in the address (#search=…&topic=…&zoom=…).
With an ask, the explorers' path is drawn and the events they kept ringed. No JavaScript library: plain
SVG and about 250 lines of script (viewer.html), nothing to fetch or vendor.

`graph_data` builds the JSON the page draws; `render_html` embeds it in a standalone file (`compassmem
view`), and the service serves the same page at /viewer, where it fetches /v1/graph with the user's key.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ..memory import Memory
from ..models import Answer
from ..store.base import require_namespace

MAX_EVENTS = 2000  # a browser draws this many comfortably; larger namespaces show their latest events


def graph_data(memory: Memory, namespace: str, answer: Answer | None = None, limit: int = MAX_EVENTS,
               public_namespace: str | None = None) -> dict[str, Any]:
    store = memory.store
    with store.snapshot():
        require_namespace(store, namespace)
        total = store.event_count(namespace)
        events = store.events(namespace, max(0, total - limit), limit)
        ids = [e.id for e in events]
        observations, _ = store.observations_of(namespace, ids)
        relations = store.relations_of(namespace, ids)
        topics = {t.id: t.label for t in store.topics(namespace)}
    by_id = {o.id: o for o in observations}
    shown = set(ids)
    data: dict[str, Any] = {
        "namespace": public_namespace or namespace, "total_events": total,
        "events": [{"id": e.id, "summary": e.summary, "time": e.time.label(), "date": e.time.date, "step": e.step,
                    "order": e.time.order, "topic": e.topic_id, "participants": e.participants,
                    "observations": [{"id": o, "speaker": by_id[o].speaker, "text": by_id[o].text,
                                      "date": by_id[o].date} for o in e.observation_ids if o in by_id]}
                   for e in events],
        "relations": [{"source": r.source, "target": r.target, "type": r.type} for r in relations
                      if r.source in shown and r.target in shown],
        "topics": topics, "ask": None}
    if answer is not None:
        data["ask"] = {"question": answer.question, "answer": answer.answer,
                       "trace": [{"explorer": s.explorer, "event": s.event_id, "action": s.action} for s in answer.trace],
                       "start": answer.start_nodes, "evidence": [e.event_id for e in answer.evidence],
                       # ringed: what the explorers kept (EXPAND or ANSWER), not every event the answer read,
                       # which in a small graph is all of them
                       "kept": list(dict.fromkeys(s.event_id for s in answer.trace if s.action != "SKIP"))}
    return data


def _template() -> str:
    return resources.files("compassmem.service").joinpath("viewer.html").read_text(encoding="utf-8")


def render_html(data: dict[str, Any]) -> str:
    """A standalone page with the data inside (a `</script>` in a summary cannot end the block)."""
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return _template().replace("/*DATA*/null", payload, 1)


def service_page() -> str:
    """The page the service serves at /viewer: it asks for a key and a namespace, then fetches the data."""
    return _template()
