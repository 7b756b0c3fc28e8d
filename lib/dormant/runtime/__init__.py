"""The actor runtime, between the public API and the ports: one wake-up (`wake`), the operations behind
every client (`service`), the contexts handed to steps, actions and hooks (`contexts`), deterministic
message ids (`ids`), clocks, and offline replay of exported histories (`offline`)."""
