//! Numbers that may be NaN. JSON has no NaN: serde_json writes it as `null`,
//! so the readers take `null` back as NaN and the schema allows it.

use serde::{Deserialize, Deserializer};
use std::borrow::Cow;

fn nan(x: Option<f64>) -> f64 {
    x.unwrap_or(f64::NAN)
}

/// One number, `null` read as NaN.
pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Option::<f64>::deserialize(d).map(nan)
}

/// Numbers, `null` elements read as NaN.
pub fn vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Ok(Vec::<Option<f64>>::deserialize(d)?
        .into_iter()
        .map(nan)
        .collect())
}

/// Optional numbers, `null` elements read as NaN.
pub fn opt_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<f64>>, D::Error> {
    Ok(Option::<Vec<Option<f64>>>::deserialize(d)?.map(|v| v.into_iter().map(nan).collect()))
}

/// Numbers (borrowed when written, owned when read).
pub fn cow<'de, 'a, D: Deserializer<'de>>(d: D) -> Result<Cow<'a, [f64]>, D::Error> {
    vec(d).map(Cow::Owned)
}

/// Optional numbers (borrowed when written, owned when read).
pub fn opt_cow<'de, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, [f64]>>, D::Error> {
    opt_vec(d).map(|v| v.map(Cow::Owned))
}

/// A decision's inputs: each variable's value, or none.
pub type Inputs = std::collections::BTreeMap<String, Option<Vec<f64>>>;

/// A map of optional numbers (a decision's inputs).
pub fn inputs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Inputs>, D::Error> {
    type Raw = std::collections::BTreeMap<String, Option<Vec<Option<f64>>>>;
    Ok(Option::<Raw>::deserialize(d)?.map(|m| {
        m.into_iter()
            .map(|(k, v)| (k, v.map(|v| v.into_iter().map(nan).collect())))
            .collect()
    }))
}
