//! Media: PDF text, images into the chat, webcam frames, files sent to the
//! user. Anything shown is first copied into the content-addressed blob
//! store, so the trajectory replays the same bytes after the file changes.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::{parse_args, Attachment, ToolDef, ToolOutput, Toolbox};

const MAX_PDF_PAGES: usize = 10;
const MAX_PDF_BYTES: u64 = 64 << 20;
const MAX_ATTACHMENT_BYTES: u64 = 64 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PdfArgs {
    path: String,
    #[serde(default = "one")]
    first_page: usize,
    #[serde(default = "ten")]
    pages: usize,
}

fn one() -> usize {
    1
}

fn ten() -> usize {
    MAX_PDF_PAGES
}

fn read_bytes(tb: &Toolbox, rel: &str, max: u64) -> Result<Vec<u8>, ToolError> {
    let abs = tb.workspace().resolve(rel)?;
    tb.workspace().read_regular(&abs, rel, max, "")
}

/// Time and memory the PDF reader may use.
const PDF_TIME: std::time::Duration = std::time::Duration::from_secs(30);
const PDF_MEMORY: u64 = 1 << 30;

fn read_pdf(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: PdfArgs = parse_args("read_pdf", args)?;
    if a.pages == 0 || a.pages > MAX_PDF_PAGES {
        return Err(ToolError::refused(format!(
            "pages must be 1 to {MAX_PDF_PAGES}; read long documents in pieces with first_page"
        )));
    }
    let bytes = read_bytes(tb, &a.path, MAX_PDF_BYTES)?;
    if !bytes.starts_with(b"%PDF") {
        return Err(ToolError::refused(format!(
            "`{}` is not a PDF file (it does not start with %PDF)",
            a.path
        )));
    }
    // A crafted PDF can make the extractor panic, loop or inflate a stream
    // without end: it runs in an isolated child with limits.
    let json = crate::sandbox::isolated(PDF_TIME, PDF_MEMORY, || {
        let pages = pdf_extract::extract_text_from_mem_by_pages(&bytes).map_err(|e| e.to_string());
        serde_json::to_vec(&pages).unwrap_or_default()
    })
    .map_err(|e| match e {
        crate::sandbox::Isolated::TimedOut => ToolError::refused(format!(
            "`{}` took longer than {} s to read and was given up; it may be damaged or built to be slow",
            a.path,
            PDF_TIME.as_secs()
        )),
        crate::sandbox::Isolated::Failed(why) => ToolError::refused(format!(
            "`{}` is a damaged PDF that could not be read ({why}; the reader may use at most {} MiB)",
            a.path,
            PDF_MEMORY >> 20
        )),
    })?;
    let pages: Vec<String> = serde_json::from_slice::<Result<Vec<String>, String>>(&json)
        .map_err(|e| ToolError::refused(format!("`{}` could not be read as a PDF: {e}", a.path)))?
        .map_err(|e| ToolError::refused(format!("`{}` could not be read as a PDF: {e}", a.path)))?;
    let total = pages.len();
    if a.first_page == 0 || a.first_page > total {
        return Err(ToolError::refused(format!(
            "first_page {} is out of range: `{}` has {total} pages",
            a.first_page, a.path
        )));
    }
    let end = (a.first_page - 1 + a.pages).min(total);
    let mut out = format!("{}: pages {}-{end} of {total}\n", a.path, a.first_page);
    for (i, text) in pages[a.first_page - 1..end].iter().enumerate() {
        out.push_str(&format!(
            "--- page {} ---\n{}\n",
            a.first_page + i,
            text.trim()
        ));
    }
    if end < total {
        out.push_str(&format!(
            "… {} more pages; call read_pdf with first_page {}\n",
            total - end,
            end + 1
        ));
    }
    Ok(out.into())
}

/// The image format of `bytes` from its magic number.
pub fn image_kind(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("gif")
    } else if bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("webp")
    } else if bytes.starts_with(b"BM") {
        Some("bmp")
    } else {
        None
    }
}

fn vision_notice(tb: &Toolbox) -> &'static str {
    if tb.services().vision() {
        ""
    } else {
        " This model cannot see images (no multimodal projector is loaded), so ask the user to describe what matters in it."
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArg {
    path: String,
}

/// Stores the workspace image `rel` as a blob: its hash, its format and
/// its size.
pub(crate) fn store_image(
    tb: &Toolbox,
    rel: &str,
) -> Result<(reverie_store::BlobHash, &'static str, usize), ToolError> {
    let bytes = read_bytes(tb, rel, MAX_ATTACHMENT_BYTES)?;
    let kind = image_kind(&bytes).ok_or_else(|| {
        ToolError::refused(format!(
            "`{rel}` is not an image (PNG, JPEG, GIF, WebP or BMP)"
        ))
    })?;
    Ok((tb.store().put_blob(rel, &bytes)?, kind, bytes.len()))
}

fn load_image(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: PathArg = parse_args("load_image", args)?;
    let (blob, kind, len) = store_image(tb, &a.path)?;
    Ok(ToolOutput {
        text: format!(
            "loaded {kind} image `{}` ({} bytes) into the chat as blob {}.{}",
            a.path,
            len,
            blob.0,
            vision_notice(tb)
        ),
        attachments: vec![Attachment {
            blob: blob.0,
            name: a.path,
            is_image: true,
        }],
    })
}

fn capture_webcam(tb: &Toolbox, _args: &Value) -> Result<ToolOutput, ToolError> {
    let frame = tb.services().camera.capture().map_err(ToolError::Refused)?;
    let png = frame.to_png().map_err(|e| ToolError::Failed {
        what: "encoding the frame".into(),
        detail: e,
    })?;
    let name = "webcam.png".to_string();
    let blob = tb.store().put_blob(&name, &png)?;
    Ok(ToolOutput {
        text: format!(
            "captured a {}x{} webcam frame into the chat as blob {}.{}",
            frame.width,
            frame.height,
            blob.0,
            vision_notice(tb)
        ),
        attachments: vec![Attachment {
            blob: blob.0,
            name,
            is_image: true,
        }],
    })
}

fn send_file(tb: &Toolbox, args: &Value) -> Result<ToolOutput, ToolError> {
    let a: PathArg = parse_args("send_file", args)?;
    let bytes = read_bytes(tb, &a.path, MAX_ATTACHMENT_BYTES)?;
    let blob = tb.store().put_blob(&a.path, &bytes)?;
    Ok(ToolOutput {
        text: format!("sent `{}` ({} bytes) to the user", a.path, bytes.len()),
        attachments: vec![Attachment {
            blob: blob.0,
            name: a.path.clone(),
            is_image: image_kind(&bytes).is_some(),
        }],
    })
}

pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "read_pdf",
        description: "Text of a PDF, at most 10 pages per call.",
        parameters: || {
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "first_page": {"type": "integer", "description": "from 1 (default 1)"},
                "pages": {"type": "integer", "description": "1 to 10 (default 10)"}
            }, "required": ["path"]})
        },
        run: read_pdf,
    },
    ToolDef {
        name: "load_image",
        description:
            "Show an image file from the workspace in the chat (and to you, if you can see images).",
        parameters: || json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        run: load_image,
    },
    ToolDef {
        name: "capture_webcam",
        description: "Take a photo with the webcam and show it in the chat.",
        parameters: || json!({"type": "object", "properties": {}}),
        run: capture_webcam,
    },
    ToolDef {
        name: "send_file",
        description: "Send a workspace file to the user as an attachment.",
        parameters: || json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        run: send_file,
    },
];
