//! The catalogue: every CVAR, PVAR, category and enumeration the MPI library
//! exports, with full metadata, refreshed as the library grows.

use crate::error::Result;
use crate::ffi;
use crate::handle::EnumHandle;
use crate::meta::{Binding, Datatype, PvarClass, Scope, Verbosity};
use crate::session::MpiT;
use serde::Serialize;
use std::collections::HashMap;

/// An MPI_T enumeration: its name and items.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Enumeration {
    /// The enumeration's name.
    pub name: String,
    /// Its items.
    pub items: Vec<EnumItem>,
}

/// One item of an enumeration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnumItem {
    /// The value a variable holds for this item.
    pub value: i32,
    /// The item's name.
    pub name: String,
}

impl Enumeration {
    /// The name of the item with this value.
    pub fn name_of(&self, value: i64) -> Option<&str> {
        self.items
            .iter()
            .find(|i| i64::from(i.value) == value)
            .map(|i| i.name.as_str())
    }

    /// The value of the item with this name (case-insensitive).
    pub fn value_of(&self, name: &str) -> Option<i32> {
        self.items
            .iter()
            .find(|i| i.name.eq_ignore_ascii_case(name))
            .map(|i| i.value)
    }
}

/// A control variable's metadata.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CvarInfo {
    /// Its MPI_T index.
    pub index: i32,
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its verbosity level.
    pub verbosity: Verbosity,
    /// The datatype of its values.
    pub datatype: Datatype,
    /// Its enumeration, if its values are items of one.
    pub enumeration: Option<Enumeration>,
    /// The kind of object it is bound to.
    pub binding: Binding,
    /// Its scope.
    pub scope: Scope,
}

/// A performance variable's metadata.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PvarInfo {
    /// Its MPI_T index.
    pub index: i32,
    /// Its name (unique only within its class).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its verbosity level.
    pub verbosity: Verbosity,
    /// Its class.
    pub class: PvarClass,
    /// The datatype of its values.
    pub datatype: Datatype,
    /// Its enumeration, for STATE variables.
    pub enumeration: Option<Enumeration>,
    /// The kind of object it is bound to.
    pub binding: Binding,
    /// Whether it cannot be written or reset.
    pub readonly: bool,
    /// Whether it runs from handle allocation, without start/stop.
    pub continuous: bool,
    /// Whether it can be read and reset atomically.
    pub atomic: bool,
}

/// A category and what it contains (indices).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Category {
    /// Its MPI_T index.
    pub index: i32,
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Indices of its control variables.
    pub cvars: Vec<i32>,
    /// Indices of its performance variables.
    pub pvars: Vec<i32>,
    /// Indices of its sub-categories.
    pub categories: Vec<i32>,
}

/// An index the library counted but would not describe, or a part of a
/// described one it would not give (an enumeration's names, a category's
/// members).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    /// "cvar", "pvar" or "category" (retried at the next refresh), or
    /// "enumeration" (of the variable at `index`; its values stay numbers)
    /// or "members" (of the category at `index`; its old lists are kept).
    pub kind: &'static str,
    /// The index of the variable or category.
    pub index: i32,
    /// The error the library returned.
    pub error: String,
}

/// What a [`Catalogue::refresh`] found (the header records it as is).
pub use vocab::record::Growth;

/// Every variable, category and enumeration of the MPI library.
///
/// Indices the library counts but whose `get_info` fails (Open MPI has
/// holes) are skipped and listed in [`Catalogue::skipped`], never trusted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Catalogue {
    cvars: Vec<CvarInfo>,
    pvars: Vec<PvarInfo>,
    categories: Vec<Category>,
    skipped: Vec<Skipped>,
    /// How many indices of each kind the library reported last time.
    #[serde(skip)]
    counted: (i32, i32, i32),
    #[serde(skip)]
    cvar_by_name: HashMap<String, usize>,
    #[serde(skip)]
    pvar_by_name: HashMap<String, Vec<usize>>,
    #[serde(skip)]
    enums: HashMap<usize, Enumeration>,
}

impl Catalogue {
    /// Enumerates everything the library exports now.
    pub fn load(mpit: &MpiT) -> Result<Catalogue> {
        let mut catalogue = Catalogue::default();
        catalogue.refresh(mpit)?;
        Ok(catalogue)
    }

    /// Adds the variables and categories that appeared since the last load
    /// (the number of variables may grow during `MPI_Init` and whenever the
    /// library loads a component), and retries indices skipped before.
    pub fn refresh(&mut self, _mpit: &MpiT) -> Result<Growth> {
        let api = ffi::api()?;
        let (ncvar, npvar, ncat) = (
            ffi::cvar_get_num(api)?,
            ffi::pvar_get_num(api)?,
            ffi::category_get_num(api)?,
        );
        let (retry, kept): (Vec<Skipped>, Vec<Skipped>) = std::mem::take(&mut self.skipped)
            .into_iter()
            .partition(|s| matches!(s.kind, "cvar" | "pvar" | "category"));
        self.skipped = kept;
        let mut growth = Growth::default();

        let cvar_indices = retry
            .iter()
            .filter(|s| s.kind == "cvar")
            .map(|s| s.index)
            .chain(self.counted.0..ncvar);
        for index in cvar_indices.collect::<Vec<_>>() {
            match ffi::cvar_get_info(api, index) {
                Ok(raw) => {
                    let enumeration = raw
                        .enumtype
                        .and_then(|e| self.enumeration(e, ("cvar enumeration", index)));
                    self.cvar_by_name.insert(raw.name.clone(), self.cvars.len());
                    self.cvars.push(CvarInfo {
                        index,
                        name: raw.name,
                        description: raw.desc,
                        verbosity: raw.verbosity,
                        datatype: raw.datatype,
                        enumeration,
                        binding: raw.binding,
                        scope: raw.scope,
                    });
                    growth.cvars += 1;
                }
                Err(e) => self.skipped.push(Skipped {
                    kind: "cvar",
                    index,
                    error: e.to_string(),
                }),
            }
        }

        let pvar_indices = retry
            .iter()
            .filter(|s| s.kind == "pvar")
            .map(|s| s.index)
            .chain(self.counted.1..npvar);
        for index in pvar_indices.collect::<Vec<_>>() {
            match ffi::pvar_get_info(api, index) {
                Ok(raw) => {
                    let enumeration = raw
                        .enumtype
                        .and_then(|e| self.enumeration(e, ("pvar enumeration", index)));
                    self.pvar_by_name
                        .entry(raw.name.clone())
                        .or_default()
                        .push(self.pvars.len());
                    self.pvars.push(PvarInfo {
                        index,
                        name: raw.name,
                        description: raw.desc,
                        verbosity: raw.verbosity,
                        class: raw.class,
                        datatype: raw.datatype,
                        enumeration,
                        binding: raw.binding,
                        readonly: raw.readonly,
                        continuous: raw.continuous,
                        atomic: raw.atomic,
                    });
                    growth.pvars += 1;
                }
                Err(e) => self.skipped.push(Skipped {
                    kind: "pvar",
                    index,
                    error: e.to_string(),
                }),
            }
        }

        let category_indices = retry
            .iter()
            .filter(|s| s.kind == "category")
            .map(|s| s.index)
            .chain(self.counted.2..ncat);
        for index in category_indices.collect::<Vec<_>>() {
            match ffi::category_get_info(api, index) {
                Ok(raw) => {
                    self.categories.push(Category {
                        index,
                        name: raw.name,
                        description: raw.desc,
                        cvars: raw.cvars,
                        pvars: raw.pvars,
                        categories: raw.categories,
                    });
                    growth.categories += 1;
                }
                Err(e) => self.skipped.push(Skipped {
                    kind: "category",
                    index,
                    error: e.to_string(),
                }),
            }
        }
        // Categories may gain members as the library grows: refresh the
        // existing ones' lists too when anything changed.
        if growth.cvars + growth.pvars > 0 {
            for category in &mut self.categories {
                match ffi::category_get_info(api, category.index) {
                    Ok(raw) => {
                        category.cvars = raw.cvars;
                        category.pvars = raw.pvars;
                        category.categories = raw.categories;
                    }
                    Err(e) => self.skipped.push(Skipped {
                        kind: "members",
                        index: category.index,
                        error: e.to_string(),
                    }),
                }
            }
        }
        self.counted = (
            ncvar.max(self.counted.0),
            npvar.max(self.counted.1),
            ncat.max(self.counted.2),
        );
        Ok(growth)
    }

    /// Decodes an enumeration, cached by handle value.
    /// A failure is recorded in [`Catalogue::skipped`] against `owner`
    /// (kind, variable index), whose values then stay numbers.
    fn enumeration(
        &mut self,
        handle: EnumHandle,
        owner: (&'static str, i32),
    ) -> Option<Enumeration> {
        let key = handle.0 as usize;
        if let Some(e) = self.enums.get(&key) {
            return Some(e.clone());
        }
        let (name, items) = match ffi::api().and_then(|api| ffi::enum_info(api, handle)) {
            Ok(found) => found,
            Err(e) => {
                self.skipped.push(Skipped {
                    kind: owner.0,
                    index: owner.1,
                    error: e.to_string(),
                });
                return None;
            }
        };
        let e = Enumeration {
            name,
            items: items
                .into_iter()
                .map(|(value, name)| EnumItem { value, name })
                .collect(),
        };
        self.enums.insert(key, e.clone());
        Some(e)
    }

    /// One line on what [`Catalogue::skipped`] holds, for the log: how many
    /// of each kind and the first error; `None` when nothing was skipped.
    pub fn skipped_summary(&self) -> Option<String> {
        let first = self.skipped.first()?;
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for s in &self.skipped {
            match counts.iter_mut().find(|(k, _)| *k == s.kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((s.kind, 1)),
            }
        }
        let known = counts
            .iter()
            .any(|(k, _)| *k == "pvar")
            .then(|| {
                crate::quirks::workaround_for(
                    crate::quirks::Quirk::PvarGetNumOverCounts,
                    &crate::quirks::LibraryVersion::of_process(),
                )
            })
            .flatten()
            .map(|w| format!("; PVAR holes are a known bug of this library: {}", w.bug))
            .unwrap_or_default();
        let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        Some(format!(
            "the library would not describe part of its catalogue ({}; first: {} {}: {}): \
             what it would not describe is left out (never sampled or written; enumerated \
             values stay numbers, categories keep the members seen before){known}",
            counts.join(", "),
            first.kind,
            first.index,
            first.error
        ))
    }

    /// Every control variable, in index order of discovery.
    pub fn cvars(&self) -> &[CvarInfo] {
        &self.cvars
    }

    /// Every performance variable, in index order of discovery.
    pub fn pvars(&self) -> &[PvarInfo] {
        &self.pvars
    }

    /// Every category.
    pub fn categories(&self) -> &[Category] {
        &self.categories
    }

    /// Indices the library counted but would not describe.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The control variable with this name.
    pub fn cvar(&self, name: &str) -> Option<&CvarInfo> {
        self.cvar_by_name.get(name).map(|&i| &self.cvars[i])
    }

    /// The performance variable with this name and class (names are unique
    /// only within a class).
    pub fn pvar(&self, name: &str, class: PvarClass) -> Option<&PvarInfo> {
        self.pvars_named(name).find(|p| p.class == class)
    }

    /// Every performance variable with this name, whatever its class.
    pub fn pvars_named<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a PvarInfo> + 'a {
        self.pvar_by_name
            .get(name)
            .into_iter()
            .flatten()
            .map(move |&i| &self.pvars[i])
    }

    /// The control variable with this MPI_T index.
    pub fn cvar_at(&self, index: i32) -> Option<&CvarInfo> {
        self.cvars.iter().find(|c| c.index == index)
    }

    /// The performance variable with this MPI_T index.
    pub fn pvar_at(&self, index: i32) -> Option<&PvarInfo> {
        self.pvars.iter().find(|p| p.index == index)
    }

    /// The category each variable belongs to, by index: (cvar index ->
    /// category name, pvar index -> category name).
    pub fn category_names(&self) -> (HashMap<i32, &str>, HashMap<i32, &str>) {
        let mut cvars = HashMap::new();
        let mut pvars = HashMap::new();
        for cat in &self.categories {
            for &i in &cat.cvars {
                cvars.entry(i).or_insert(cat.name.as_str());
            }
            for &i in &cat.pvars {
                pvars.entry(i).or_insert(cat.name.as_str());
            }
        }
        (cvars, pvars)
    }
}
