{{- define "policydsl.name" -}}policydsl-scheduler{{- end -}}
{{- define "policydsl.labels" -}}
app.kubernetes.io/name: {{ include "policydsl.name" . }}
{{- end -}}
