//! The actuator: scope-checked CVAR writes with read-back and an audit
//! record for every attempt.
//!
//! Before writing it checks the variable's scope (CONSTANT and READONLY are
//! refused; ALL_EQ and GROUP_EQ only in the `pre-init` and `init` phases,
//! where every rank applies the same value at the same point) and converts
//! the policy's value to the variable's type and count. The library may
//! still refuse (`MPI_T_ERR_CVAR_SET_NOT_NOW`, common in Open MPI after
//! init): that is a logged refusal, never a failure of the application.

use mpit::meta::{Binding, Datatype};
use mpit::value::Value;
use mpit::Cvar;
use mpit::Error;
use mpit::MpiT;
use mpit::Object;
use mpit::{Catalogue, CvarInfo};

/// What a policy asks to write.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// One number: to the element `index`, or to every element.
    Number(f64),
    /// One number per element.
    Numbers(Vec<f64>),
    /// A string, or the name of an enumeration item.
    Text(String),
}

pub use vocab::record::{CvarWrite, Outcome};

/// When the write happens, for the scope rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Before `PMPI_Init`, or right after it, at the same point on every rank.
    Collective,
    /// At a rank's own moment (periodic, finalize).
    RankLocal,
    /// A user's request (`mpit-tuner set`), at each rank's own moment.
    UserRequest,
}

/// Writes `request` into the CVAR `name`, reading the value before and
/// after; `dry_run` reads only.
pub fn write(
    mpit: &MpiT,
    catalogue: &Catalogue,
    name: &str,
    index: Option<u32>,
    request: &Request,
    when: When,
    dry_run: bool,
) -> CvarWrite {
    let mut record = CvarWrite::missing(name, index);
    let Some(info) = catalogue.cvar(name) else {
        record.error = Some(format!("this MPI library exports no CVAR named `{name}`"));
        return record;
    };
    if let Some(why) = scope_refusal(info, when) {
        record.outcome = Outcome::Refused;
        record.error = Some(why);
        return record;
    }
    if info.binding != Binding::NoObject {
        record.outcome = Outcome::Invalid;
        record.error = Some(format!(
            "`{name}` is bound to {} objects; policies write only unbound CVARs",
            info.binding.short()
        ));
        return record;
    }
    let cvar = match Cvar::open(mpit, info, Object::None) {
        Ok(c) => c,
        Err(e) => {
            record.outcome = Outcome::Refused;
            record.error = Some(e.to_string());
            return record;
        }
    };
    // Every failed call is told in the record, after the main error.
    let mut notes = Vec::new();
    write_open(
        &cvar,
        info,
        index,
        request,
        dry_run,
        &mut record,
        &mut notes,
    );
    if let Err(e) = cvar.close() {
        notes.push(format!("then freeing the handle: {e}"));
    }
    if !notes.is_empty() {
        record.error = Some(
            record
                .error
                .into_iter()
                .chain(notes)
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    record
}

/// The write on an open handle; `notes` collects the failures that do not
/// decide the outcome (a read of the old value).
fn write_open(
    cvar: &Cvar<'_>,
    info: &CvarInfo,
    index: Option<u32>,
    request: &Request,
    dry_run: bool,
    record: &mut CvarWrite,
    notes: &mut Vec<String>,
) {
    let name = &info.name;
    record.old = cvar
        .read()
        .map_err(|e| notes.push(format!("reading the old value: {e}")))
        .ok();
    let value = match convert(info, cvar.count(), index, request, record.old.as_ref()) {
        Ok(v) => v,
        Err(why) => {
            record.outcome = Outcome::Invalid;
            record.error = Some(format!("`{name}`: {why}"));
            return;
        }
    };
    record.requested = Some(value.clone());
    if dry_run {
        record.outcome = Outcome::DryRun;
        record.readback = record.old.clone();
        return;
    }
    match cvar.write(&value) {
        Ok(()) => match cvar.read() {
            Ok(back) => {
                record.outcome = if back == value {
                    Outcome::Written
                } else {
                    Outcome::WrittenDiffers
                };
                record.readback = Some(back);
            }
            Err(e) => {
                record.outcome = Outcome::WrittenUnverified;
                record.error = Some(format!("reading it back: {e}"));
            }
        },
        Err(e) => {
            record.outcome = match e {
                Error::SetNotNow { .. } => Outcome::RefusedNow,
                Error::BadValue { .. } => Outcome::Invalid,
                _ => Outcome::Refused,
            };
            record.error = Some(e.to_string());
            record.readback = cvar
                .read()
                .map_err(|e| notes.push(format!("reading it back: {e}")))
                .ok();
        }
    }
}

/// Why the scope forbids this write at this moment, if it does.
pub fn scope_refusal(info: &CvarInfo, when: When) -> Option<String> {
    if !info.scope.is_writable() {
        return Some(format!(
            "`{}` has scope {} and cannot be written",
            info.name, info.scope
        ));
    }
    if info.scope.requires_equal_values() && when == When::UserRequest {
        return Some(format!(
            "`{}` has scope {}: every rank must hold the same value, and a request reaches each \
             rank at its own moment, so ranks would switch at different points and collectives \
             could run with mismatched settings; only the agreed-point mechanism of online \
             collective tuning (which switches every rank between the same two collective \
             calls) may change it while the job runs. Set it before the job starts instead (its \
             environment variable, or a pre-init or init policy)",
            info.name, info.scope
        ));
    }
    if info.scope.requires_equal_values() && when == When::RankLocal {
        return Some(format!(
            "`{}` has scope {}: every rank must hold the same value, so a rank may not change \
             it on its own while the application runs (ranks would switch at different moments \
             and collectives could run with mismatched settings, hang or corrupt data); write it \
             in phase pre-init or init instead",
            info.name, info.scope
        ));
    }
    None
}

/// Converts a request to a value of the variable's type and count.
pub(crate) fn convert(
    info: &CvarInfo,
    count: usize,
    index: Option<u32>,
    request: &Request,
    old: Option<&Value>,
) -> Result<Value, String> {
    if info.datatype == Datatype::Char {
        return match request {
            Request::Text(t) => Ok(Value::Str(t.clone())),
            _ => Err("this CVAR takes a string: write it with `text = \"...\"`".into()),
        };
    }
    let numbers: Vec<f64> = match (request, index) {
        (Request::Text(item), _) => {
            let Some(e) = &info.enumeration else {
                return Err(format!("`{item}` is text, but this CVAR takes numbers"));
            };
            let v = e.value_of(item).ok_or_else(|| {
                format!(
                    "`{item}` is not one of its items: {}",
                    e.items
                        .iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            vec![f64::from(v); count]
        }
        (Request::Number(x), None) => vec![*x; count],
        (Request::Numbers(xs), None) => {
            if xs.len() != count {
                return Err(format!(
                    "it has {count} element(s), the value has {}",
                    xs.len()
                ));
            }
            xs.clone()
        }
        (Request::Number(x), Some(i)) => {
            let i = i as usize;
            if i >= count {
                return Err(format!(
                    "index {i} is out of range (it has {count} elements)"
                ));
            }
            let mut all = old
                .map(Value::to_f64s)
                .filter(|v| v.len() == count)
                .ok_or("cannot read its current value to change one element")?;
            all[i] = *x;
            all
        }
        (Request::Numbers(_), Some(_)) => {
            return Err("an array value cannot be written to one element".into())
        }
    };
    if numbers.iter().any(|x| !x.is_finite()) {
        return Err("the value is not a finite number".into());
    }
    Ok(match info.datatype {
        Datatype::Double => Value::Double(numbers),
        Datatype::Unsigned | Datatype::UnsignedLong | Datatype::UnsignedLongLong => {
            if numbers.iter().any(|x| *x < 0.0) {
                return Err("a negative value for an unsigned CVAR".into());
            }
            Value::Uint(numbers.iter().map(|x| x.round() as u64).collect())
        }
        _ => Value::Int(numbers.iter().map(|x| x.round() as i64).collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpit::meta::{Scope, Verbosity};
    use mpit::{EnumItem, Enumeration};

    fn info(scope: Scope, datatype: Datatype) -> CvarInfo {
        CvarInfo {
            index: 0,
            name: "X".into(),
            description: String::new(),
            verbosity: Verbosity::UserBasic,
            datatype,
            enumeration: None,
            binding: Binding::NoObject,
            scope,
        }
    }

    #[test]
    fn scope_rules() {
        assert!(scope_refusal(&info(Scope::Readonly, Datatype::Int), When::Collective).is_some());
        assert!(scope_refusal(&info(Scope::Local, Datatype::Int), When::RankLocal).is_none());
        let why = scope_refusal(&info(Scope::AllEq, Datatype::Int), When::RankLocal).unwrap();
        assert!(why.contains("ALL_EQ") && why.contains("pre-init"), "{why}");
        assert!(scope_refusal(&info(Scope::AllEq, Datatype::Int), When::Collective).is_none());
        let why = scope_refusal(&info(Scope::GroupEq, Datatype::Int), When::UserRequest).unwrap();
        assert!(
            why.contains("GROUP_EQ") && why.contains("agreed-point"),
            "{why}"
        );
        assert!(scope_refusal(&info(Scope::Local, Datatype::Int), When::UserRequest).is_none());
    }

    #[test]
    fn conversions() {
        let int = info(Scope::Local, Datatype::Int);
        assert_eq!(
            convert(&int, 4, None, &Request::Number(7.0), None).unwrap(),
            Value::Int(vec![7; 4])
        );
        assert_eq!(
            convert(
                &int,
                2,
                Some(1),
                &Request::Number(9.0),
                Some(&Value::Int(vec![1, 2]))
            )
            .unwrap(),
            Value::Int(vec![1, 9])
        );
        assert!(convert(&int, 2, None, &Request::Numbers(vec![1.0]), None).is_err());
        assert!(convert(&int, 1, Some(3), &Request::Number(1.0), None).is_err());
        let uint = info(Scope::Local, Datatype::Unsigned);
        assert!(convert(&uint, 1, None, &Request::Number(-1.0), None).is_err());
        let mut e = info(Scope::Local, Datatype::Int);
        e.enumeration = Some(Enumeration {
            name: "algo".into(),
            items: vec![
                EnumItem {
                    value: 0,
                    name: "auto".into(),
                },
                EnumItem {
                    value: 3,
                    name: "ring".into(),
                },
            ],
        });
        assert_eq!(
            convert(&e, 1, None, &Request::Text("ring".into()), None).unwrap(),
            Value::Int(vec![3])
        );
        assert!(convert(&e, 1, None, &Request::Text("nope".into()), None)
            .unwrap_err()
            .contains("auto, ring"));
        let s = info(Scope::Local, Datatype::Char);
        assert_eq!(
            convert(&s, 64, None, &Request::Text("x".into()), None).unwrap(),
            Value::Str("x".into())
        );
    }
}
