//! Consent (spec 02): recording, withdrawing and erasing consent, its status, history, export and checks, statistics, do-not-sell and CCPA opt-out.
