//! One staged tree per (package, family).
