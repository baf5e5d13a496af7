"""Capacity planning: closed-loop load on one chosen config, SLO finder, worker count."""
