// The portal's only script: progressive enhancement of the copy buttons. Without it the
// buttons stay hidden and the values can be selected and copied by hand. It reads the page
// only; it sends nothing anywhere (CSP: script-src 'self', no connect-src).
'use strict';

function textOf(target) {
  return target instanceof HTMLInputElement ? target.value : target.textContent || '';
}

/** The fallback where the Clipboard API is missing or refused: select, then copy. */
function selectAndCopy(target) {
  if (target instanceof HTMLInputElement) {
    target.focus();
    target.select();
  } else {
    const range = document.createRange();
    range.selectNodeContents(target);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
  return document.execCommand('copy');
}

for (const button of document.querySelectorAll('button[data-copy]')) {
  const target = document.getElementById(button.dataset.copy);
  if (!target) continue;
  const status =
    button.nextElementSibling && button.nextElementSibling.classList.contains('copy-status')
      ? button.nextElementSibling
      : null;
  button.hidden = false;
  button.addEventListener('click', async () => {
    let copied = false;
    try {
      await navigator.clipboard.writeText(textOf(target));
      copied = true;
    } catch {
      try {
        copied = selectAndCopy(target);
      } catch {
        copied = false;
      }
    }
    if (status) status.textContent = copied ? 'Copied' : 'Select and copy it by hand';
    if (copied)
      setTimeout(() => {
        if (status) status.textContent = '';
      }, 4000);
  });
}
