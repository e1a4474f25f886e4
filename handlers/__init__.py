"""Request handlers, one module per API family; they talk to the log store's API only."""
