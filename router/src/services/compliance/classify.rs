//! Column classification: recording and listing the levels the router enforces.
