"""A tiny deterministic synthetic benchmark for tests: the whole pipeline runs on it in seconds.

Each document describes one invented creature (a made-up name) with distinctive attribute
words: a kind, a home region, a colour + body part, a diet, a habit and a companion creature.
Queries cover all four ``CATEGORIES``:

- ``exact_lookup``: "What is <name>?" -> that creature's document (grade 2);
- ``semantic_lookup``: the kind, region and a paraphrased colour/body part, without the name
  (each (kind, region) pair is unique, so the gold document is well defined);
- ``multi_doc``: a creature and its companion -> main doc grade 2, companion grade 1;
- ``unanswerable``: an invented name that no document mentions (``must_abstain``).

Same (n_docs, n_queries, seed) -> same dataset and fingerprint, on any platform.
"""

from __future__ import annotations

import random
from itertools import product

from bench.data.base import CATEGORIES, Dataset, Document, Query
from bench.errors import ConfigError

_KINDS = ("river fish", "mountain bird", "desert lizard", "forest beetle", "sea snail",
          "cave bat", "meadow moth", "swamp frog", "tundra hare", "reef crab")
_PLACES = ("the Velmora Hills", "the Quessary Marsh", "the Drennick Coast", "the Olvasti Plain",
           "the Karrowind Valley", "the Ithelmar Dunes", "the Brisquen Lakes",
           "the Tamberlow Forest", "the Usk Tablelands", "the Pellidor Caves",
           "the Orrin Fjords", "the Zanthe Steppe", "the Mirelock Fens", "the Cadwen Islands",
           "the Haldrun Peaks", "the Sorrel Delta")
# colour -> paraphrase used by semantic queries (so the query does not copy the document).
_COLOURS = {"crimson": "deep red", "azure": "sky-blue", "amber": "honey-coloured",
            "violet": "purple", "ivory": "creamy white", "emerald": "bright green",
            "cobalt": "dark blue", "ochre": "earthy yellow", "silver": "metallic grey",
            "scarlet": "vivid red", "teal": "blue-green", "charcoal": "sooty black"}
_PARTS = {"claws": "curved talons", "feathers": "plumage", "scales": "armour plates",
          "wings": "flight membranes", "antennae": "feelers", "spines": "sharp quills",
          "fins": "swimming paddles", "whiskers": "facial bristles"}
_DIETS = ("eats floating moss", "feeds on tiny shrimp", "drinks flower nectar", "hunts night moths",
          "grazes on lichen", "cracks hard seeds", "filters plankton", "scavenges fallen fruit")
_HABITS = ("sings loudly at dawn", "migrates every winter", "glows faintly at night",
           "burrows deep into sand", "sleeps hanging upside down", "builds towers of pebbles",
           "changes colour when startled", "travels in large swarms")
_SYLLABLES = ("zor", "vath", "quil", "mera", "tosk", "lund", "brae", "kiv", "ostra", "pell",
              "dru", "xan", "yel", "fenn", "gor", "ithe", "nax", "rumo", "sev", "tal", "ulb",
              "wyn", "cor", "dal")
_ROLES = (("staff",), ("admin",))


class SyntheticDataset:
    """``n_docs`` invented-creature documents and ``n_queries`` queries, all from ``seed``."""

    def __init__(self, *, n_docs: int = 60, n_queries: int = 24, seed: int = 0) -> None:
        if not 4 <= n_docs <= len(_KINDS) * len(_PLACES):
            raise ConfigError("dataset.n_docs",
                              f"must be between 4 and {len(_KINDS) * len(_PLACES)}, got {n_docs}")
        if not len(CATEGORIES) <= n_queries <= 2 * n_docs:
            raise ConfigError("dataset.n_queries",
                              f"must be between {len(CATEGORIES)} and 2*n_docs, got {n_queries}")
        self.n_docs = n_docs
        self.n_queries = n_queries
        self.seed = seed

    def load(self) -> Dataset:
        rng = random.Random(self.seed)
        names = _names(rng, self.n_docs + self.n_queries)
        used, spare = names[: self.n_docs], names[self.n_docs:]
        combos = list(product(_KINDS, _PLACES))
        rng.shuffle(combos)
        facts = []
        for i, name in enumerate(used):
            kind, place = combos[i]
            facts.append({
                "name": name, "kind": kind, "place": place,
                "colour": rng.choice(sorted(_COLOURS)), "part": rng.choice(sorted(_PARTS)),
                "diet": rng.choice(_DIETS), "habit": rng.choice(_HABITS),
            })
        # companion: the next creature in a shuffled ring, so every doc has exactly one
        ring = list(range(self.n_docs))
        rng.shuffle(ring)
        companion = {ring[i]: ring[(i + 1) % len(ring)] for i in range(len(ring))}
        docs = tuple(self._document(i, facts, companion[i], rng) for i in range(self.n_docs))
        queries = self._queries(rng, facts, companion, docs, spare)
        return Dataset(name=f"synthetic:{self.n_docs}x{self.n_queries}:seed{self.seed}",
                       documents=docs, queries=queries)

    @staticmethod
    def _document(i: int, facts: list[dict[str, str]], other: int,
                  rng: random.Random) -> Document:
        f, o = facts[i], facts[other]
        text = (f"{f['name']} is a {f['kind']} that lives in {f['place']}. "
                f"It has {f['colour']} {f['part']}. It {f['diet']} and {f['habit']}. "
                f"It is often seen together with the {o['kind']} {o['name']}.")
        roles = _ROLES[rng.randrange(2)] if rng.random() < 0.15 else ()
        return Document(doc_id=f"syn:d{i:03d}", title=f["name"], text=text,
                        tags=(f["kind"].split()[-1],), allowed_roles=roles)

    @staticmethod
    def _queries(rng: random.Random, facts: list[dict[str, str]], companion: dict[int, int],
                 docs: tuple[Document, ...], spare: list[str]) -> tuple[Query, ...]:
        n_total = len(spare)  # one spare (never used) name per query was drawn
        per_cat = [n_total // 4 + (1 if c < n_total % 4 else 0) for c in range(4)]
        order = list(range(len(facts)))
        rng.shuffle(order)
        out: list[Query] = []
        for cat, n in zip(CATEGORIES, per_cat, strict=True):
            for k in range(n):
                qid = f"syn:q{len(out):03d}"
                i = order[k % len(order)]
                f, d = facts[i], docs[i]
                first = d.text.split(". ")[0] + "."
                if cat == "exact_lookup":
                    out.append(Query(qid, f"What is {f['name']}?", cat, ((d.doc_id, 2),),
                                     (first,), expected_answer=first,
                                     allowed_roles=d.allowed_roles))
                elif cat == "semantic_lookup":
                    text = (f"Which {f['kind']} from {f['place']} has "
                            f"{_COLOURS[f['colour']]} {_PARTS[f['part']]}?")
                    claim = f"{f['name']} has {f['colour']} {f['part']}."
                    out.append(Query(qid, text, cat, ((d.doc_id, 2),), (claim,),
                                     expected_answer=f["name"], allowed_roles=d.allowed_roles))
                elif cat == "multi_doc":
                    j = companion[i]
                    o, od = facts[j], docs[j]
                    text = (f"What is {f['name']}, and what does the creature it is seen "
                            f"with eat?")
                    claims = (first, f"{o['name']} {o['diet']}.")
                    # the caller must be able to see both docs: union of their (single) roles
                    roles = tuple(sorted({*d.allowed_roles, *od.allowed_roles}))
                    out.append(Query(qid, text, cat, ((d.doc_id, 2), (od.doc_id, 1)), claims,
                                     allowed_roles=roles if len(roles) <= 1 else ()))
                else:
                    out.append(Query(qid, f"What is {spare[k]}?", cat, must_abstain=True))
        return tuple(out)


def _names(rng: random.Random, n: int) -> list[str]:
    """``n`` invented two/three-syllable names, none contained in another ("Zorvath" would be
    found inside "Zorvathquil", making an unanswerable name look mentioned)."""
    names: list[str] = []
    while len(names) < n:
        name = "".join(rng.sample(_SYLLABLES, rng.choice((2, 3)))).capitalize()
        low = name.lower()
        if not any(low in o.lower() or o.lower() in low for o in names):
            names.append(name)
    return names
