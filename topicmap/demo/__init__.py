"""The demo: a deterministic news web and stand-ins for the social APIs, for ``make demo`` and the tests.

Never imported by production code (the rest of ``topicmap``, ``assets``, ``resources``, ``sensors``).

- ``web``: the demo news web generator (``generate_demo_web``, ``DemoWeb``), which builds it in steps:
  ``world`` (outlets, stories, links), then ``pages`` (each URL's page), over the records of ``model``;
  ``vocab``: its subjects, templates and cast; ``outlets``: its outlets and their house styles.
- ``server``: serves a demo web over loopback HTTP, dispatching on the Host header.
- ``standins``: STAND-IN servers for the Bit.ly v3 and Facebook Graph APIs (made-up figures, on loopback).
"""
