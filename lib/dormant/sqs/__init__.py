"""Wake-ups over SQS: the transport that sends them (a FIFO queue per deployment, a standard queue for timers) and
the poller that plays Lambda's event source locally (`dormant dev`, tests)."""
