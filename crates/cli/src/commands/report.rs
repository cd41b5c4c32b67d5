//! `tessera report`: a plan drawn by tessera-report, as HTML or SVG.

use anyhow::Result;
use tessera_report::{plan_report_html, plan_svg};

use crate::args::{ReportArgs, ReportFormat};
use crate::output::emit;

pub fn run(args: &ReportArgs) -> Result<()> {
    let mut plan = crate::inputs::read_sound_plan(&args.plan)?;
    if let Some(note) = plan.withdraw_overstated_claims() {
        crate::output::note(format_args!("{}: {note}", args.plan.display()));
    }
    let title = match &args.title {
        Some(title) => title.clone(),
        None => format!(
            "Tessera plan — {}",
            args.plan.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ),
    };
    let document = match args.format {
        ReportFormat::Html => plan_report_html(&plan, &title),
        ReportFormat::Svg => plan_svg(&plan),
    };
    emit(document.as_bytes(), args.output.as_deref())
}
