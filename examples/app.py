"""The actors of the tour, as a deployable registry: the default `DORMANT_APP` of template.yaml and infra/.

Apart from examples/tour.py (the demo driver, which imports the dev stack and the HTTP client), so that the
Lambda functions load only the actors: nothing dev-only in their import path.
"""

from __future__ import annotations

from dormant import setup
from examples import approval_gate, counter, cross_actor_saga, payment_webhook, request_response, timers

registry = setup(*[definition for module in (counter, request_response, approval_gate, timers, cross_actor_saga,
                                             payment_webhook)
                   for definition in module.registry.actors.values()])
