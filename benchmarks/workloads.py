"""The actors the cost benchmarks run (`DORMANT_APP=benchmarks.workloads:registry`): the examples' patterns."""

from __future__ import annotations

from dormant import setup
from examples import counter, fan_out_fan_in, request_response, simple_workflow, timers

registry = setup(*[definition for module in (counter, fan_out_fan_in, request_response, simple_workflow, timers)
                   for definition in module.registry.actors.values()])
