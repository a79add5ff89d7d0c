"""The core: abstract values, dtypes, primitives, interpreters, Jaxprs, staging and rule helpers."""
