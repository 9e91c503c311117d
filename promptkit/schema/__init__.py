"""promptkit subpackage."""
