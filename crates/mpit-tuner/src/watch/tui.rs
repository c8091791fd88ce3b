//! The full-screen view of `mpit-tuner watch`, drawn with ratatui on its
//! crossterm backend from the same [`Watch`] the plain mode prints: a
//! header, the variables with the largest spread across ranks (each with a
//! sparkline of its recent means), the latest events and the warnings.
//!
//! `q`, Esc or Ctrl-C quit; the view also ends when every rank has closed
//! its log, and then prints the last frame as plain text so it stays on the
//! screen. The terminal is restored on every way out: a [`Screen`] guard
//! leaves the alternate screen and raw mode when dropped (errors, SIGTERM
//! and SIGHUP included), and a panic hook does the same before the panic
//! message is printed.

use super::{event_lines, num, Watch};
use anyhow::{Context, Result};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use ratatui::{Frame, Terminal};
use std::io::{self, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

/// How often keys and signals are looked at while waiting for a refresh.
const TICK: Duration = Duration::from_millis(100);

/// Runs the full-screen view until a quit key, a signal or the end of the
/// job.
pub fn run(watch: &mut Watch, every: Duration, top: usize) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut signals = Vec::new();
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signals.push(
            signal_hook::flag::register(signal, Arc::clone(&stop))
                .context("handling SIGTERM and SIGHUP")?,
        );
    }
    let ended = show(watch, every, top, &stop);
    for id in signals {
        signal_hook::low_level::unregister(id);
    }
    if ended? {
        // The last frame stays on the screen after the alternate one.
        let mut out = io::stdout().lock();
        writeln!(out, "{}", watch.frame(top))?;
        out.flush()?;
    }
    Ok(())
}

/// Draws frames until told to stop; whether the job ended (rather than
/// the user quitting).
fn show(watch: &mut Watch, every: Duration, top: usize, stop: &AtomicBool) -> Result<bool> {
    let _screen = Screen::enter()?;
    let mut terminal =
        Terminal::new(CrosstermBackend::new(io::stdout())).context("opening the terminal")?;
    terminal.clear()?;
    loop {
        watch.poll().context("reading the run directory")?;
        terminal.draw(|f| draw(f, watch, top))?;
        if watch.finished() {
            return Ok(true);
        }
        let next = Instant::now() + every;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if event::poll(left.min(TICK))? {
                match event::read()? {
                    Event::Key(key) if key.kind != KeyEventKind::Release => {
                        let ctrl_c = key.code == KeyCode::Char('c')
                            && key.modifiers.contains(KeyModifiers::CONTROL);
                        if ctrl_c || matches!(key.code, KeyCode::Char('q') | KeyCode::Esc) {
                            return Ok(false);
                        }
                    }
                    Event::Resize(..) => {
                        terminal.draw(|f| draw(f, watch, top))?;
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The terminal in raw mode on the alternate screen, for as long as this
/// lives.
struct Screen;

impl Screen {
    fn enter() -> Result<Screen> {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        terminal::enable_raw_mode().context("putting the terminal in raw mode")?;
        // From here on, every way out restores the terminal.
        let screen = Screen;
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
            .context("entering the alternate screen")?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// Leaves the alternate screen and raw mode (harmless when already left).
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
}

/// One frame of the view.
fn draw(f: &mut Frame, watch: &Watch, top: usize) {
    let warnings = event_lines(&watch.warnings, 4);
    let [head, vars, events, warns] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(top.clamp(1, 40) as u16 + 3),
        Constraint::Min(3),
        Constraint::Length(warnings.len().max(1) as u16 + 2),
    ])
    .areas(f.area());

    let [what, status] = watch.header();
    let mut notes = Vec::new();
    if watch.finished() {
        notes.push("job finished: every rank closed its log".to_string());
    }
    if watch.damaged > 0 {
        notes.push(format!("{} lines not understood", watch.damaged));
    }
    let status = if notes.is_empty() {
        status
    } else {
        format!("{status} | {}", notes.join(" | "))
    };
    let bold = Style::default().add_modifier(Modifier::BOLD);
    f.render_widget(
        Paragraph::new(vec![Line::styled(what, bold), Line::raw(status)])
            .block(Block::bordered().title(" mpit-tuner watch (q: quit) ")),
        head,
    );

    f.render_widget(variables(watch, top, vars), vars);

    let lines = event_lines(&watch.events, events.height.saturating_sub(2) as usize);
    let lines: Vec<Line> = if lines.is_empty() {
        vec![Line::raw("(none)")]
    } else {
        lines.into_iter().map(Line::raw).collect()
    };
    f.render_widget(
        Paragraph::new(lines)
            .block(Block::bordered().title(" latest decisions, writes, refusals, steering ")),
        events,
    );

    let lines: Vec<Line> = if warnings.is_empty() {
        vec![Line::raw("(none)")]
    } else {
        warnings
            .into_iter()
            .map(|w| Line::styled(w, Style::default().fg(Color::Yellow)))
            .collect()
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" warnings ")),
        warns,
    );
}

/// Widths of the table's fixed columns: name, min, max, mean, rate/s.
const WIDTHS: [u16; 5] = [34, 16, 16, 12, 12];

/// The table of the `top` variables with the largest spread across ranks.
fn variables<'a>(watch: &'a Watch, top: usize, area: Rect) -> Table<'a> {
    // What is left of the width (borders, column gaps) for the sparkline.
    let fixed: u16 = WIDTHS.iter().sum::<u16>() + WIDTHS.len() as u16 + 2;
    let spark = area.width.saturating_sub(fixed).max(1) as usize;
    let rows = watch.var_rows();
    let mut table: Vec<Row> = rows
        .iter()
        .take(top)
        .map(|r| {
            let history: Vec<f64> = watch.history(r.name).collect();
            Row::new(vec![
                r.name.to_string(),
                format!("{} @{}", num(r.lo.1), r.lo.0),
                format!("{} @{}", num(r.hi.1), r.hi.0),
                num(r.mean),
                r.rate.map_or_else(|| "-".to_string(), num),
                sparkline(&history, spark),
            ])
        })
        .collect();
    if table.is_empty() {
        table.push(Row::new(vec!["(no sample yet)"]));
    }
    let widths = WIDTHS
        .iter()
        .map(|&w| Constraint::Length(w))
        .chain([Constraint::Fill(1)]);
    Table::new(table, widths)
        .header(
            Row::new(vec![
                "name",
                "min @rank",
                "max @rank",
                "mean",
                "rate/s",
                "recent means",
            ])
            .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(Block::bordered().title(" variables (largest spread across ranks now) "))
}

/// The last `width` values as a line of block characters, lowest to highest
/// of what is shown.
fn sparkline(values: &[f64], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let shown = &values[values.len().saturating_sub(width)..];
    let lo = shown.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = shown.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    shown
        .iter()
        .map(|&v| {
            if hi > lo {
                let i = ((v - lo) / (hi - lo) * (BARS.len() - 1) as f64).round() as usize;
                BARS[i.min(BARS.len() - 1)]
            } else {
                BARS[0]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;

    #[test]
    fn sparklines_scale_to_what_they_show() {
        assert_eq!(sparkline(&[], 10), "");
        assert_eq!(sparkline(&[3.0, 3.0], 10), "▁▁");
        assert_eq!(sparkline(&[0.0, 1.0, 2.0], 10), "▁▅█");
        assert_eq!(sparkline(&[100.0, 0.0, 1.0], 2), "▁█");
    }

    #[test]
    fn an_empty_directory_draws() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = Watch::new(dir.path());
        watch.poll().unwrap();
        let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
        terminal.draw(|f| draw(f, &watch, 8)).unwrap();
        let screen: String = terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        for text in ["0 ranks", "(no sample yet)", "warnings", "(none)"] {
            assert!(screen.contains(text), "no {text:?} in {screen}");
        }
    }
}
