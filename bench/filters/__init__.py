"""Stage `filters`: entitlement (hard, independently checked) and metadata filters on ``Hits``.

Start at ``base.py`` (rules, ``FilterOutcome``, ``visible``, ``eligible_gold``), then
``entitlement.py``, ``metadata.py`` and ``decision.py`` (hard predicate vs soft boost).
"""
