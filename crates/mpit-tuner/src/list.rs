//! `mpit-tuner list`: every MPI_T variable of the MPI library, with its
//! metadata and, with `--values`, the current values of control variables.
//!
//! The order of work matters, for two reasons. Libraries add variables
//! during `MPI_Init` (Open MPI registers whole components then), so the
//! catalogue is loaded before it and refreshed after it. And Open MPI 4.1
//! segfaults in `MPI_T_cvar_read` after `MPI_Init` for some variables of the
//! components it unloaded there (`opal_common_ucx_verbose`, for one), while
//! reading every variable before `MPI_Init` is safe: so the values of the
//! variables that exist before `MPI_Init` are read before it, and only those
//! `MPI_Init` added are read after it.

use crate::table::{self, Table};
use anyhow::{bail, Context, Result};
use clap::Args;
use mpit::{
    Binding, Catalogue, Category, Cvar, CvarInfo, Error, Library, MpiProcess, MpiT, Object,
    PvarClass, PvarInfo, Scope, Skipped, Value, Verbosity,
};
use regex::{Regex, RegexBuilder};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufWriter, Write};

const AFTER_HELP: &str = "\
Values (--values): control variables that exist before MPI_Init are read \
before it: their values are as configured at MPI_Init (environment, MCA \
parameters, ...), and MPI_Init may change some of them. Variables that MPI_Init \
adds are read after it. Variables bound to MPI objects (communicators, ...) \
have one value per object and show `(bound to comm)` instead. A variable whose \
read fails shows `<error: MPI_T_ERR_...>`.

Under a launcher (`mpiexec -n 4 mpit-tuner list`) rank 0 prints; the other \
ranks print nothing. Descriptions are cut to the terminal's width when \
standard output is a terminal, except in ranks that Open MPI's mpiexec \
launched: it gives them a pseudo-terminal whatever its own output is.

JSON (--json): an object with `library` (MPI_Get_library_version), \
`library_family`, `mpi_version` (of the header the build used), `ranks`, \
`totals` (whole catalogue), `cvars` and `pvars` (after filters; each the \
variable's metadata, CVARs with `count`, `value`, `value_item` (enumerations), \
`value_error` and `value_source` (before_mpi_init, after_mpi_init, \
bound_to_object) when --values is given), `categories` and `skipped`.";

/// Options of `mpit-tuner list`.
#[derive(Debug, Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct ListArgs {
    /// Show control variables (CVARs) only.
    #[arg(long)]
    cvars: bool,

    /// Show performance variables (PVARs) only.
    #[arg(long)]
    pvars: bool,

    /// Show variables whose name or description matches REGEX
    /// (case-insensitive).
    #[arg(long, value_name = "REGEX")]
    grep: Option<String>,

    /// Show variables of verbosity LEVEL or below: 1 (user_basic) to 9
    /// (mpidev_all), or a name such as `tuner_detail`.
    #[arg(long, value_name = "LEVEL", value_parser = parse_verbosity)]
    verbosity: Option<u8>,

    /// Show PVARs of this class (counter, timer, level, size,
    /// highwatermark, ...); implies --pvars unless --cvars or --scope.
    #[arg(long, value_name = "CLASS", value_parser = parse_class)]
    class: Option<PvarClass>,

    /// Show CVARs of this scope (constant, readonly, local, group,
    /// group_eq, all, all_eq); implies --cvars unless --pvars or --class.
    #[arg(long, value_name = "SCOPE", value_parser = parse_scope)]
    scope: Option<Scope>,

    /// Show variables of this category or its sub-categories
    /// (case-insensitive name).
    #[arg(long, value_name = "NAME")]
    category: Option<String>,

    /// Read and show the current values of CVARs (see below for when they
    /// are read).
    #[arg(long)]
    values: bool,

    /// Print JSON instead of a table.
    #[arg(long, conflicts_with_all = ["names_only", "skipped"])]
    json: bool,

    /// Print only the names of the variables shown, one per line.
    #[arg(long, conflicts_with = "skipped")]
    names_only: bool,

    /// Never cut descriptions (to the terminal's width) or long values.
    #[arg(long)]
    wide: bool,

    /// List the indices the library counted but would not describe, with
    /// its error, instead of the variables.
    #[arg(long)]
    skipped: bool,
}

fn parse_verbosity(text: &str) -> Result<u8, String> {
    if let Ok(level) = text.parse::<u8>() {
        return if (1..=9).contains(&level) {
            Ok(level)
        } else {
            Err(format!("{level} is not a level between 1 and 9"))
        };
    }
    Verbosity::parse(text)
        .map(Verbosity::level)
        .ok_or_else(|| format!("expected 1 to 9 or one of {}", names(Verbosity::ALL)))
}

fn parse_class(text: &str) -> Result<PvarClass, String> {
    PvarClass::parse(text).ok_or_else(|| format!("expected one of {}", names(PvarClass::ALL)))
}

fn parse_scope(text: &str) -> Result<Scope, String> {
    Scope::parse(text).ok_or_else(|| format!("expected one of {}", names(Scope::ALL)))
}

fn names<T: std::fmt::Display>(all: &[T]) -> String {
    all.iter()
        .map(|v| v.to_string().to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which variables to show: the options, validated.
#[derive(Debug)]
struct Filter {
    cvars: bool,
    pvars: bool,
    grep: Option<Regex>,
    verbosity: Option<u8>,
    class: Option<PvarClass>,
    scope: Option<Scope>,
}

impl Filter {
    fn new(args: &ListArgs) -> Result<Filter> {
        let grep = args
            .grep
            .as_deref()
            .map(|pattern| {
                RegexBuilder::new(pattern)
                    .case_insensitive(true)
                    .build()
                    .with_context(|| format!("invalid --grep pattern `{pattern}`"))
            })
            .transpose()?;
        // No kind chosen: both. --class asks for PVARs, --scope for CVARs.
        let (only_c, only_p) = (
            args.cvars || args.scope.is_some(),
            args.pvars || args.class.is_some(),
        );
        let any = only_c || only_p;
        Ok(Filter {
            cvars: !any || only_c,
            pvars: !any || only_p,
            grep,
            verbosity: args.verbosity,
            class: args.class,
            scope: args.scope,
        })
    }

    fn common(&self, name: &str, description: &str, verbosity: Verbosity) -> bool {
        unset_or(self.verbosity, |max| verbosity.level() <= max)
            && unset_or(self.grep.as_ref(), |re| {
                re.is_match(name) || re.is_match(description)
            })
    }

    fn cvar(&self, c: &CvarInfo) -> bool {
        self.cvars
            && unset_or(self.scope, |s| s == c.scope)
            && self.common(&c.name, &c.description, c.verbosity)
    }

    fn pvar(&self, p: &PvarInfo) -> bool {
        self.pvars
            && unset_or(self.class, |k| k == p.class)
            && self.common(&p.name, &p.description, p.verbosity)
    }
}

/// Whether an optional criterion is unset or holds (`Option::is_none_or`,
/// which is newer than the workspace's minimum Rust version).
fn unset_or<T>(criterion: Option<T>, holds: impl FnOnce(T) -> bool) -> bool {
    match criterion {
        Some(c) => holds(c),
        None => true,
    }
}

/// When and how a CVAR's value was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum ValueSource {
    BeforeMpiInit,
    AfterMpiInit,
    BoundToObject,
}

/// The outcome of reading one CVAR.
#[derive(Debug)]
struct CvarValue {
    source: ValueSource,
    count: Option<usize>,
    value: Option<Result<Value, Error>>,
}

impl CvarValue {
    fn bound() -> CvarValue {
        CvarValue {
            source: ValueSource::BoundToObject,
            count: None,
            value: None,
        }
    }

    fn read(mpit: &MpiT, info: &CvarInfo, source: ValueSource) -> CvarValue {
        match Cvar::open(mpit, info, Object::None) {
            Ok(cvar) => CvarValue {
                source,
                count: Some(cvar.count()),
                value: Some(cvar.read()),
            },
            Err(e) => CvarValue {
                source,
                count: None,
                value: Some(Err(e)),
            },
        }
    }

    /// The enumeration item the value names, for enumerated variables.
    fn item<'a>(&self, info: &'a CvarInfo) -> Option<&'a str> {
        let value = self.value.as_ref()?.as_ref().ok()?;
        info.enumeration.as_ref()?.name_of(value.as_i64()?)
    }

    fn error(&self) -> Option<String> {
        let e = self.value.as_ref()?.as_ref().err()?;
        Some(
            e.mpi_error_name()
                .map_or_else(|| e.to_string(), str::to_string),
        )
    }

    /// The value column of the table.
    fn cell(&self, info: &CvarInfo) -> String {
        match &self.value {
            None => format!("(bound to {})", info.binding.short()),
            Some(Err(_)) => format!("<error: {}>", self.error().unwrap_or_default()),
            Some(Ok(value)) => match self.item(info) {
                Some(item) => item.to_string(),
                None => value.to_string(),
            },
        }
    }
}

/// Everything `list` learned, on rank 0.
struct Listing {
    library: String,
    family: Library,
    ranks: i32,
    catalogue: Catalogue,
    /// By CVAR index, with --values.
    values: HashMap<i32, CvarValue>,
    /// How many unbound CVARs were read before MPI_Init and after it.
    read_before: usize,
    read_after: usize,
}

/// Runs `mpit-tuner list`.
pub fn run(args: &ListArgs) -> Result<()> {
    let filter = Filter::new(args)?;
    // Before MPI_Init, which may change the environment it looks at.
    let width = if args.wide {
        None
    } else {
        table::terminal_width()
    };
    let Some(listing) = gather(args, &filter)? else {
        return Ok(());
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let members = match &args.category {
        Some(name) => Some(category_members(&listing.catalogue, name)?),
        None => None,
    };
    let cvars: Vec<&CvarInfo> = listing
        .catalogue
        .cvars()
        .iter()
        .filter(|c| filter.cvar(c))
        .filter(|c| unset_or(members.as_ref(), |m| m.0.contains(&c.index)))
        .collect();
    let pvars: Vec<&PvarInfo> = listing
        .catalogue
        .pvars()
        .iter()
        .filter(|p| filter.pvar(p))
        .filter(|p| unset_or(members.as_ref(), |m| m.1.contains(&p.index)))
        .collect();
    if args.json {
        write_json(&mut out, &listing, &cvars, &pvars)?;
    } else if args.names_only {
        for name in cvars
            .iter()
            .map(|c| &c.name)
            .chain(pvars.iter().map(|p| &p.name))
        {
            writeln!(out, "{name}")?;
        }
    } else if args.skipped {
        write_skipped(&mut out, &listing)?;
    } else {
        write_table(&mut out, &listing, args, &cvars, &pvars, width)?;
    }
    out.flush()?;
    Ok(())
}

/// Initialises MPI_T and MPI, loads the catalogue and reads the values
/// asked for; `None` on ranks other than 0, which print nothing.
fn gather(args: &ListArgs, filter: &Filter) -> Result<Option<Listing>> {
    let mpit = MpiT::init().map_err(|e| match e {
        Error::NoMpi => anyhow::anyhow!(
            "{e}: this mpit-tuner was built without an MPI library to link \
             (mpit-sys found none; choose MPI with MPICC: docs/libraries.md#choosing-the-mpi-library)"
        ),
        e => anyhow::Error::new(e).context("cannot initialise MPI_T"),
    })?;
    let mut catalogue =
        Catalogue::load(&mpit).context("cannot list the variables of the MPI library")?;
    let mut values = HashMap::new();
    if args.values {
        for info in catalogue.cvars() {
            values.insert(
                info.index,
                match info.binding {
                    Binding::NoObject => CvarValue::read(&mpit, info, ValueSource::BeforeMpiInit),
                    _ => CvarValue::bound(),
                },
            );
        }
    }
    let read_before = values
        .values()
        .filter(|v| v.source == ValueSource::BeforeMpiInit)
        .count();
    let mpi = MpiProcess::init().context("cannot initialise MPI")?;
    catalogue
        .refresh(&mpit)
        .context("cannot list the variables MPI_Init added")?;
    if mpi.rank() != 0 {
        return Ok(None);
    }
    let mut read_after = 0;
    if args.values {
        // Only what MPI_Init added, and only what will be shown.
        for info in catalogue.cvars().iter().filter(|c| filter.cvar(c)) {
            if values.contains_key(&info.index) {
                continue;
            }
            let value = match info.binding {
                Binding::NoObject => {
                    read_after += 1;
                    CvarValue::read(&mpit, info, ValueSource::AfterMpiInit)
                }
                _ => CvarValue::bound(),
            };
            values.insert(info.index, value);
        }
    }
    let library = mpit
        .library_version()
        .context("MPI_Get_library_version failed")?;
    Ok(Some(Listing {
        family: Library::from_version(&library),
        library,
        ranks: mpi.size(),
        catalogue,
        values,
        read_before,
        read_after,
    }))
}

/// The CVAR and PVAR indices in the category `name` and its
/// sub-categories.
fn category_members(catalogue: &Catalogue, name: &str) -> Result<(HashSet<i32>, HashSet<i32>)> {
    let Some(root) = catalogue
        .categories()
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name))
    else {
        let mut known: Vec<&str> = catalogue
            .categories()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        known.sort_unstable();
        let shown = known.len().min(20);
        bail!(
            "this MPI library has no category `{name}`; it has {}: {}{}",
            known.len(),
            known[..shown].join(", "),
            if known.len() > shown { ", ..." } else { "" }
        );
    };
    let by_index: HashMap<i32, &Category> = catalogue
        .categories()
        .iter()
        .map(|c| (c.index, c))
        .collect();
    let (mut cvars, mut pvars) = (HashSet::new(), HashSet::new());
    let mut seen = HashSet::new();
    let mut todo = vec![root];
    while let Some(category) = todo.pop() {
        if !seen.insert(category.index) {
            continue;
        }
        cvars.extend(&category.cvars);
        pvars.extend(&category.pvars);
        todo.extend(category.categories.iter().filter_map(|i| by_index.get(i)));
    }
    Ok((cvars, pvars))
}

/// `MPI_VERSION.MPI_SUBVERSION` of the header the build used.
fn mpi_version() -> String {
    // SAFETY: constants the mpit-sys shim defines from the header; they are
    // plain ints, never written.
    let (version, subversion) = unsafe {
        (
            mpit_sys::MPIT_HEADER_MPI_VERSION,
            mpit_sys::MPIT_HEADER_MPI_SUBVERSION,
        )
    };
    format!("{version}.{subversion}")
}

fn first_line(text: &str) -> String {
    table::one_line(text.lines().next().unwrap_or_default())
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn write_table(
    out: &mut impl Write,
    listing: &Listing,
    args: &ListArgs,
    cvars: &[&CvarInfo],
    pvars: &[&PvarInfo],
    width: Option<usize>,
) -> io::Result<()> {
    let catalogue = &listing.catalogue;
    writeln!(
        out,
        "{} (MPI {} header)",
        first_line(&listing.library),
        mpi_version()
    )?;
    let skipped = catalogue.skipped().len();
    writeln!(
        out,
        "{}, {}, {}; {} skipped{}",
        plural(catalogue.cvars().len(), "CVAR", "CVARs"),
        plural(catalogue.pvars().len(), "PVAR", "PVARs"),
        plural(catalogue.categories().len(), "category", "categories"),
        plural(skipped, "index", "indices"),
        if skipped > 0 {
            " (see `mpit-tuner list --skipped`)"
        } else {
            ""
        }
    )?;
    if args.values {
        writeln!(
            out,
            "Values: read before MPI_Init (as configured at MPI_Init) for {}, after it for {} \
             that MPI_Init added; bound CVARs have one value per object",
            plural(listing.read_before, "CVAR", "CVARs"),
            listing.read_after
        )?;
    }
    writeln!(out)?;

    let mut header = vec![
        "NAME",
        "KIND",
        "CLASS/SCOPE",
        "TYPE",
        "COUNT",
        "BIND",
        "LVL",
    ];
    if args.values {
        header.push("VALUE");
    }
    header.push("DESCRIPTION");
    let mut table = Table::new(header);
    if args.values && !args.wide {
        // Some values are long (Open MPI's configure parameters, paths).
        table.cap(7, 40);
    }
    for c in cvars {
        let value = listing.values.get(&c.index);
        let mut row = vec![
            c.name.clone(),
            "CVAR".into(),
            c.scope.as_str().to_ascii_lowercase(),
            type_name(c.datatype.short(), c.enumeration.is_some()),
            value
                .and_then(|v| v.count)
                .map_or_else(|| "-".into(), |n| n.to_string()),
            c.binding.short().into(),
            c.verbosity.level().to_string(),
        ];
        if args.values {
            row.push(value.map_or_else(String::new, |v| v.cell(c)));
        }
        row.push(table::one_line(&c.description));
        table.push(row);
    }
    for p in pvars {
        let mut row = vec![
            p.name.clone(),
            "PVAR".into(),
            p.class.as_str().to_ascii_lowercase(),
            type_name(p.datatype.short(), p.enumeration.is_some()),
            "-".into(),
            p.binding.short().into(),
            p.verbosity.level().to_string(),
        ];
        if args.values {
            row.push(String::new());
        }
        row.push(table::one_line(&p.description));
        table.push(row);
    }
    table.write(out, width)?;
    writeln!(out)?;
    writeln!(
        out,
        "{} shown ({}, {}) of {}",
        plural(cvars.len() + pvars.len(), "variable", "variables"),
        plural(cvars.len(), "CVAR", "CVARs"),
        plural(pvars.len(), "PVAR", "PVARs"),
        catalogue.cvars().len() + catalogue.pvars().len()
    )
}

fn type_name(short: &str, enumerated: bool) -> String {
    if enumerated { "enum" } else { short }.to_string()
}

fn write_skipped(out: &mut impl Write, listing: &Listing) -> io::Result<()> {
    let skipped = listing.catalogue.skipped();
    writeln!(
        out,
        "{}: {} the library counted but would not describe",
        first_line(&listing.library),
        plural(skipped.len(), "index", "indices")
    )?;
    if skipped.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    let mut table = Table::new(["KIND", "INDEX", "ERROR"]);
    for s in skipped {
        table.push(vec![s.kind.into(), s.index.to_string(), s.error.clone()]);
    }
    table.write(out, None)
}

#[derive(Serialize)]
struct JsonListing<'a> {
    library: &'a str,
    library_family: Library,
    mpi_version: String,
    ranks: i32,
    totals: Totals,
    cvars: Vec<JsonCvar<'a>>,
    pvars: &'a [&'a PvarInfo],
    categories: &'a [Category],
    skipped: &'a [Skipped],
}

#[derive(Serialize)]
struct Totals {
    cvars: usize,
    pvars: usize,
    categories: usize,
    skipped: usize,
}

#[derive(Serialize)]
struct JsonCvar<'a> {
    #[serde(flatten)]
    info: &'a CvarInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_item: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_source: Option<ValueSource>,
}

fn write_json(
    out: &mut impl Write,
    listing: &Listing,
    cvars: &[&CvarInfo],
    pvars: &[&PvarInfo],
) -> Result<()> {
    let catalogue = &listing.catalogue;
    let cvars = cvars
        .iter()
        .map(|&info| {
            let v = listing.values.get(&info.index);
            JsonCvar {
                info,
                count: v.and_then(|v| v.count),
                value: v.and_then(|v| v.value.as_ref()?.as_ref().ok()),
                value_item: v.and_then(|v| v.item(info)),
                value_error: v.and_then(CvarValue::error),
                value_source: v.map(|v| v.source),
            }
        })
        .collect();
    let json = JsonListing {
        library: &listing.library,
        library_family: listing.family,
        mpi_version: mpi_version(),
        ranks: listing.ranks,
        totals: Totals {
            cvars: catalogue.cvars().len(),
            pvars: catalogue.pvars().len(),
            categories: catalogue.categories().len(),
            skipped: catalogue.skipped().len(),
        },
        cvars,
        pvars,
        categories: catalogue.categories(),
        skipped: catalogue.skipped(),
    };
    serde_json::to_writer_pretty(&mut *out, &json).context("writing JSON")?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: ListArgs,
    }

    fn filter(argv: &[&str]) -> Result<Filter> {
        let w = Wrapper::try_parse_from(std::iter::once("list").chain(argv.iter().copied()))?;
        Filter::new(&w.args)
    }

    #[test]
    fn verbosity_accepts_levels_and_names() {
        assert_eq!(parse_verbosity("4"), Ok(4));
        assert_eq!(parse_verbosity("tuner_detail"), Ok(5));
        assert_eq!(parse_verbosity("MPI_T_VERBOSITY_USER_BASIC"), Ok(1));
        assert!(parse_verbosity("0").is_err());
        assert!(parse_verbosity("loud").unwrap_err().contains("tuner_basic"));
    }

    #[test]
    fn class_and_scope_choose_the_kinds() {
        let f = filter(&[]).unwrap();
        assert!(f.cvars && f.pvars);
        let f = filter(&["--class", "counter"]).unwrap();
        assert!(!f.cvars && f.pvars);
        let f = filter(&["--scope", "all_eq"]).unwrap();
        assert!(f.cvars && !f.pvars);
        let f = filter(&["--scope", "local", "--class", "timer"]).unwrap();
        assert!(f.cvars && f.pvars);
        let f = filter(&["--pvars"]).unwrap();
        assert!(!f.cvars && f.pvars);
    }

    #[test]
    fn grep_is_case_insensitive_on_name_and_description() {
        let f = filter(&["--grep", "EAGER"]).unwrap();
        assert!(f.common("btl_vader_eager_limit", "", Verbosity::UserBasic));
        assert!(f.common("x", "The Eager threshold", Verbosity::UserBasic));
        assert!(!f.common("x", "y", Verbosity::UserBasic));
        let err = filter(&["--grep", "("]).unwrap_err();
        assert!(format!("{err:#}").contains("invalid --grep pattern `(`"));
    }

    #[test]
    fn verbosity_filter_keeps_lower_levels() {
        let f = filter(&["--verbosity", "tuner_basic"]).unwrap();
        assert!(f.common("x", "", Verbosity::UserAll));
        assert!(f.common("x", "", Verbosity::TunerBasic));
        assert!(!f.common("x", "", Verbosity::TunerDetail));
    }
}
