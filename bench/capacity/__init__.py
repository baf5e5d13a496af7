"""Capacity planning: open-loop load (``schedule``, ``driver``, ``http``), vLLM-named metrics
with goodput and quality-goodput (``metrics``, ``quality``), the knee search (``knee``), the
generator's ceiling (``ceiling``), faults (``faults``, ``servers``), the whole study
(``study``, ``backends``, ``report``), Ray-distributed load (``distributed``); the closed-loop
levels and their sizing answer (``loadgen``). docs/experiments/capacity.md."""
