// The login link carries the token after '#', which never reaches a server or its logs:
// fill it in and sign in with a POST (no state changes on GET). A link pasted into a tab that
// already shows this page changes only the '#' part, which loads nothing: follow it too.
"use strict";

function signInFromLink() {
  const failed = document.getElementById("login-failed");
  if (window.location.hash === "#failed") {
    failed.hidden = false;
    return;
  }
  const token = new URLSearchParams(window.location.hash.slice(1)).get("token");
  if (token) {
    history.replaceState(null, "", window.location.pathname);
    failed.hidden = true;
    document.getElementById("token").value = token;
    document.getElementById("login-form").submit();
  }
}

document.addEventListener("DOMContentLoaded", signInFromLink);
window.addEventListener("hashchange", signInFromLink);
