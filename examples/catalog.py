"""Every pattern of the RivetKit workflow docs, mapped to its Dormant example module, and the patterns Dormant
adds (MORE_PATTERNS).

tests/examples/test_catalog.py checks that each module exists, exposes `registry`, and has a test.
"""

PATTERNS: dict[str, str] = {
    "Simple workflow": "simple_workflow",
    "Loops": "counter",
    "Setup & teardown (Loop.break_)": "setup_run_teardown",
    "Queue": "queue_commands",
    "Request/response (using queue)": "request_response",
    "Timers": "timers",
    "Join": "join_dashboard",
    "Race": "race_auction",
    "Timeouts": "timeouts",
    "Rollback": "rollback_checkout",
    "Store workflow progress in state + broadcast": "progress_broadcast",
    "Cron (queue-driven)": "cron",
    "Queue-driven worker": "queue_worker",
    "Setup & teardown (vars and hooks)": "vars_hooks",
    "Human approval gate": "approval_gate",
    "Fan-out / fan-in (join)": "fan_out_fan_in",
    "Batch drainer": "batch_drainer",
    "Coordinator -> worker RPC": "coordinator_rpc",
    "Request/response over queue (async RPC)": "async_rpc",
    "Scatter-gather across actors": "scatter_gather",
    "Timeout + fallback actor": "timeout_fallback",
    "Cross-actor saga (compensating actions)": "cross_actor_saga",
    "Signal-driven control loop": "control_loop",
    "Poll + backoff loop": "poll_backoff",
    "Child worker orchestration": "child_workers",
    "Bounded drain + concurrency cap": "bounded_drain",
    "Versioned workflow evolution": "versioned_evolution",
    "Checkpoint-friendly loop design": "checkpoint_loop",
}

MORE_PATTERNS: dict[str, str] = {
    "Request -> human -> reply (a completable request answered after a decision)": "request_human_reply",
    "Flow control across actors (a payment provider's concurrency and rate)": "payment_limits",
    "Keyed and prioritized flow control (one charge per customer at a time, urgent first)": "keyed_limits",
    "Bounded map (a quorum write: two replicas at a time, done at three acknowledgements)": "bounded_map",
    "Search attributes (find actors by what their steps set)": "order_search",
    "Callback from an outside system (a payment provider's webhook: ctx.callback)": "payment_webhook",
    "Approval link in an email (a confirmation page; only its button decides)": "refund_approval",
    "Changing and bounding a running workflow (get_version, try_step, an ephemeral step, workflow_timeout)":
        "order_evolution",
}
