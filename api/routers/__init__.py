"""One router per resource; each handler is a few lines that call `api.service`."""
