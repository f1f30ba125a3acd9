"""Memory: fields, ndarrays, structs of fields, and host values (a vector read from a field)."""
